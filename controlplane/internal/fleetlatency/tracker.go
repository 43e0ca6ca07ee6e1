package fleetlatency

import (
	"iter"
	"sync"
	"sync/atomic"
	"time"

	"k8s.io/utils/clock"
)

// Tracker holds, per service name, when this replica computed the
// service's latest change and the fleet's ACK latencies since then. Safe
// for concurrent use.
type Tracker struct {
	clock clock.PassiveClock
	// start is when the Tracker was made: trigger times before it are
	// not kept.
	start time.Time
	// gen counts the calls of ServicesChanged (the watch's updates).
	gen atomic.Uint64

	// mu guards the map and each entry's changed and gen; ACKs hold it
	// for reading and count with atomic adds, changes hold it for writing.
	mu       sync.RWMutex
	services map[string]*entry
}

// entry is one service's latest change and the latencies of its ACKs,
// and the trigger times of its recent changes.
type entry struct {
	changed time.Time
	gen     uint64
	hist    histogram
	// changes are the service's recent changes that carried trigger
	// times, oldest first, at most maxChanges.
	changes []change
}

// Option configures a Tracker.
type Option func(*Tracker)

// WithClock sets the clock of changes and ACKs.
func WithClock(c clock.PassiveClock) Option {
	return func(t *Tracker) { t.clock = c }
}

// New returns a Tracker that knows no change yet.
func New(opts ...Option) *Tracker {
	t := &Tracker{clock: clock.RealClock{}, services: map[string]*entry{}}
	for _, o := range opts {
		o(t)
	}
	t.start = t.clock.Now()
	return t
}

// ServicesChanged records that the services named in changed changed now,
// resetting their latencies, and forgets those in removed. triggers holds,
// by name of a changed service, the trigger times its change carries
// (package doc, "Trigger times"); a name without one carries none. The
// watch calls it once per update, before it publishes the views the update
// built, so every view published afterwards carries a generation at least
// that of the change (Generation).
//
// Every call is a new generation, even one that changed no service: the
// views it publishes (a NodeConfig, a node that came back) then carry a
// generation no view taken earlier carries, so a stream never takes the
// changes of an older generation for new ones (Triggers).
func (t *Tracker) ServicesChanged(changed, removed []string, triggers map[string]Trigger) {
	now := t.clock.Now()
	t.mu.Lock()
	defer t.mu.Unlock()
	gen := t.gen.Load() + 1
	defer t.gen.Store(gen)
	for _, name := range removed {
		delete(t.services, name)
	}
	for _, name := range changed {
		e, ok := t.services[name]
		if !ok {
			e = &entry{}
			t.services[name] = e
		} else if e.gen == gen {
			continue // listed twice
		}
		e.changed, e.gen = now, gen
		e.hist.reset()
		if tr, ok := triggers[name]; ok {
			t.record(e, gen, tr, now)
		}
	}
}

// Generation is the number of updates recorded so far. The cache stamps
// each view it publishes with it, and passes the stamp of the
// acknowledged view to Applied.
func (t *Tracker) Generation() uint64 { return t.gen.Load() }

// Applied records an ACK, now, of a view stamped gen (Generation when it
// was published) that brought the node each name of names at the node's
// desired version. A name counts for its service's latest change only if
// the view was published after that change; names of no service with a
// change (NodeConfigs, services unchanged since the replica started) are
// ignored. names is read once, under the Tracker's read lock.
func (t *Tracker) Applied(gen uint64, names iter.Seq[string]) {
	now := t.clock.Now()
	t.mu.RLock()
	defer t.mu.RUnlock()
	if len(t.services) == 0 {
		return
	}
	for name := range names {
		if e, ok := t.services[name]; ok && e.gen <= gen {
			e.hist.add(now.Sub(e.changed))
		}
	}
}

// Stats is one service's fleet programming latency since its latest
// change.
type Stats struct {
	// Changed is when this replica computed the change.
	Changed time.Time
	// Samples is the number of ACKs counted: nodes that acknowledged a
	// view holding the change.
	Samples int
	counts  [numBuckets]uint32
	largest time.Duration
}

// Quantile returns the latency of rank ceil(q·Samples) among the samples
// (q in (0, 1]), as the upper bound of its bucket or the largest sample
// when that is smaller; 0 without samples. See the package doc for the
// resolution.
func (s Stats) Quantile(q float64) time.Duration {
	if s.Samples == 0 {
		return 0
	}
	rank := max(1, min(s.Samples, int(ceil(q*float64(s.Samples)))))
	seen := 0
	for i, c := range s.counts {
		if seen += int(c); seen >= rank {
			return min(upperBound(i), s.largest)
		}
	}
	return s.largest
}

// ceil is math.Ceil that forgives float error just above an integer
// (0.99·100 is 99.00000000000001).
func ceil(x float64) float64 {
	const eps = 1e-9
	f := float64(int64(x))
	if x-f <= eps {
		return f
	}
	return f + 1
}

// Service returns name's latency since its latest change; false when the
// service has not changed since the replica started (or was removed).
func (t *Tracker) Service(name string) (Stats, bool) {
	t.mu.RLock()
	defer t.mu.RUnlock()
	e, ok := t.services[name]
	if !ok {
		return Stats{}, false
	}
	s := Stats{Changed: e.changed}
	s.counts, s.Samples, s.largest = e.hist.snapshot()
	return s, true
}

// Len returns the number of services with an entry.
func (t *Tracker) Len() int {
	t.mu.RLock()
	defer t.mu.RUnlock()
	return len(t.services)
}
