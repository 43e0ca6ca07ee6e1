package cache

import (
	"slices"

	spb "google.golang.org/genproto/googleapis/rpc/status"

	switchyardv1 "github.com/switchyard-proxy/switchyard/proto/switchyard/v1"
)

// Changes says which names may differ between two views.
type Changes struct {
	// All: anything may differ; diff every name.
	All bool
	// Names, sorted and unique; meaningful only when All is false.
	Names []string
	// Since and Until are the generations (ApplyObserver.Generation) of
	// the first and the last publish that marked these changes; Since is 0
	// when unknown (a watch's first Take, or no ApplyObserver). A view
	// taken with them brings the node the changes published in
	// Since..Until, and no earlier one: what a stream attaches trigger
	// times by.
	Since, Until uint64
}

// Empty reports whether nothing changed.
func (c Changes) Empty() bool { return !c.All && len(c.Names) == 0 }

// Merge returns the union of c and o. Beyond limit names the union becomes
// All: diffing everything then costs the same as diffing the names, and the
// set stays bounded by the view's size.
func (c Changes) Merge(o Changes, limit int) Changes {
	out := Changes{Since: minGen(c.Since, o.Since), Until: max(c.Until, o.Until)}
	switch {
	case c.All || o.All:
		out.All = true
	case len(o.Names) == 0:
		out.Names = c.Names
	case len(c.Names) == 0:
		out.Names = o.Names
	default:
		names := append(slices.Clone(c.Names), o.Names...)
		slices.Sort(names)
		out.Names = slices.Compact(names)
		if len(out.Names) > limit {
			out.All, out.Names = true, nil
		}
	}
	return out
}

// minGen is the earlier of two generations, 0 (unknown) counting as none
// unless both are.
func minGen(a, b uint64) uint64 {
	switch {
	case a == 0:
		return b
	case b == 0:
		return a
	}
	return min(a, b)
}

// Watch is one stream's subscription to one node. Its methods are safe for
// concurrent use, though a stream normally drives it from one goroutine.
type Watch struct {
	c     *Cache
	n     *node
	ready chan struct{} // capacity 1: "something changed since Take"
	done  chan struct{} // closed when a newer watch replaced this one

	// Guarded by n.mu.
	dirty    map[string]struct{}
	all      bool
	inFlight int
	replaced bool
	// since is the generation of the first publish that marked something
	// since the last Take; 0: none did, or it carried no generation.
	since uint64

	// For the cache's ApplyObserver, guarded by n.mu: the names taken
	// since the last ACK, the version and generation of the view last
	// taken, and whether the stream has acknowledged anything yet.
	taken        Changes
	takenVersion string
	takenGen     uint64
	ackedOnce    bool
}

// Watch opens the watch of node for a stream of kind rpc ("delta", "sotw")
// and records agent as connected. A previous watch of the node is replaced:
// its Done channel closes. The first Take diffs everything.
func (c *Cache) Watch(name string, agent *switchyardv1.Node, rpc string) *Watch {
	n := c.lockNode(name)
	defer c.mu.RUnlock()
	defer n.mu.Unlock()

	if old := n.watch; old != nil {
		old.replaced = true
		close(old.done)
	}
	w := &Watch{
		c:     c,
		n:     n,
		ready: make(chan struct{}, 1),
		done:  make(chan struct{}),
		all:   true,
	}
	n.watch = w
	n.ack.connect(agent, rpc, c.clock.Now())
	return w
}

// Ready receives a value when the node's view changed since the last Take.
func (w *Watch) Ready() <-chan struct{} { return w.ready }

// Done is closed when a newer watch for the same node replaced this one.
func (w *Watch) Done() <-chan struct{} { return w.done }

// Take returns the node's newest view (nil while the node is unknown) and
// the names that may have changed since the previous Take, and resets them.
func (w *Watch) Take() (NodeView, Changes) {
	w.n.mu.Lock()
	defer w.n.mu.Unlock()
	select {
	case <-w.ready:
	default:
	}
	var ch Changes
	if w.all {
		ch.All = true
	} else if len(w.dirty) > 0 {
		ch.Names = make([]string, 0, len(w.dirty))
		for name := range w.dirty {
			ch.Names = append(ch.Names, name)
		}
		slices.Sort(ch.Names)
	}
	ch.Since, ch.Until = w.since, w.n.gen
	w.all, w.dirty, w.since = false, nil, 0
	if w.c.applied != nil {
		w.takenVersion, w.takenGen = "", w.n.gen
		limit := 0
		if w.n.view != nil {
			w.takenVersion, limit = w.n.view.Version(), w.n.view.Len()
		}
		w.taken = w.taken.Merge(ch, limit)
	}
	return w.n.view, ch
}

// SetInFlight records how many responses the stream has sent and not yet
// seen answered (0 or 1), for Pending.
func (w *Watch) SetInFlight(n int) {
	w.n.mu.Lock()
	defer w.n.mu.Unlock()
	w.inFlight = n
}

// Acked records that the agent applied view; report may be nil. Ignored
// once the watch was replaced.
//
// With an ApplyObserver, it is told the names view brought to the node at
// their desired version, when view is the one last taken. The stream's
// first ACK tells it nothing: it is a resync after a connect, and the
// agent may have had those versions from another replica.
func (w *Watch) Acked(view NodeView, report *switchyardv1.ApplyReport) {
	w.n.mu.Lock()
	defer w.n.mu.Unlock()
	if w.replaced {
		return
	}
	if o := w.c.applied; o != nil {
		if w.ackedOnce && view != nil && view.Version() == w.takenVersion {
			o.Applied(w.takenGen, newlyApplied(w.n.ack.view, view, w.n.view, w.taken))
		}
		w.taken, w.ackedOnce = Changes{}, true
	}
	w.n.ack.acked(view, report, w.c.clock.Now())
}

// Nacked records that the agent rejected a response and kept its last good
// state. Ignored once the watch was replaced.
func (w *Watch) Nacked(st *spb.Status) {
	w.n.mu.Lock()
	defer w.n.mu.Unlock()
	if !w.replaced {
		w.n.ack.nacked(st, w.c.clock.Now())
	}
}

// Close ends the watch: the node shows as disconnected unless a newer watch
// replaced this one. Idempotent.
func (w *Watch) Close() {
	w.c.mu.Lock()
	defer w.c.mu.Unlock()
	w.n.mu.Lock()
	defer w.n.mu.Unlock()
	if w.n.watch != w {
		return
	}
	w.n.watch = nil
	w.n.ack.disconnect()
	if w.n.view == nil {
		delete(w.c.nodes, w.n.name)
	}
}

// markAll and markNames record changes published at generation gen
// (0: none); the caller holds n.mu.
func (w *Watch) markAll(gen uint64) {
	w.all, w.dirty = true, nil
	w.marked(gen)
}

func (w *Watch) markNames(names []string, limit int, gen uint64) {
	w.marked(gen)
	if w.all {
		return
	}
	if w.dirty == nil {
		w.dirty = make(map[string]struct{}, len(names))
	}
	for _, name := range names {
		w.dirty[name] = struct{}{}
	}
	if len(w.dirty) > limit {
		w.markAll(gen)
	}
}

// marked notes the first generation marked since the last Take.
func (w *Watch) marked(gen uint64) {
	if w.since == 0 {
		w.since = gen
	}
}

// signal wakes the stream without blocking; one pending signal is enough.
func (w *Watch) signal() {
	select {
	case w.ready <- struct{}{}:
	default:
	}
}

// pending reports the watch's queued state; the caller holds n.mu.
func (w *Watch) pending() Pending {
	return Pending{DirtyNames: len(w.dirty), DirtyAll: w.all, InFlight: w.inFlight}
}
