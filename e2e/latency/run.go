package latency

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/netip"
	"time"

	"k8s.io/client-go/kubernetes"

	"github.com/switchyard-proxy/switchyard/e2e/cluster"
	"github.com/switchyard-proxy/switchyard/e2e/testbed/ruleread"
)

// workloadName is the workload's Deployment and ClusterIP Service
// (cluster.AgnhostWorkload: Ready once the pod's port accepts, probed
// every second; a deleted pod goes at once).
const workloadName = "lat"

// Options configure Measure.
type Options struct {
	// Proxy is the proxy installed on the bed (cluster.InstallProxy); its
	// mode says which rules to read.
	Proxy cluster.Proxy
	// Run labels the record (1-based), for repeated measurements.
	Run int
	// Events is the number of scale events (default 100), alternating
	// Base → Base+1 and back.
	Events int
	// Base is the Deployment's replicas at rest (default 1).
	Base int
	// ReadyDelay is the readiness probe's initial delay, whole seconds
	// (default 0: Ready at the first probe, usually within a second of
	// the container's start, when the proxies may still be inside their
	// minimum sync interval after the sync that added the pod as not
	// ready; 2 s takes that interval out of the scale-ups).
	ReadyDelay time.Duration
	// Gap is the pause after an event has settled and before the next
	// scale call (default 2 s): longer than both proxies' minimum sync
	// interval (1 s), so that no event waits for the previous one's sync.
	Gap time.Duration
	// ReadPause is the pause between two reads of one node's rules
	// (default 10 ms); each read costs a few milliseconds more.
	ReadPause time.Duration
	// EventTimeout bounds one event (default 2 min).
	EventTimeout time.Duration
	// Namespace holds the workload (default "latency"); it is deleted at
	// the end.
	Namespace string
	Logger    *slog.Logger
}

func (o Options) withDefaults() Options {
	if o.Events == 0 {
		o.Events = 100
	}
	if o.Base == 0 {
		o.Base = 1
	}
	if o.Gap == 0 {
		o.Gap = 2 * time.Second
	}
	if o.ReadPause == 0 {
		o.ReadPause = 10 * time.Millisecond
	}
	if o.EventTimeout == 0 {
		o.EventTimeout = 2 * time.Minute
	}
	if o.Namespace == "" {
		o.Namespace = "latency"
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	return o
}

// measurement is one Measure call's state.
type measurement struct {
	c       *cluster.Cluster
	cs      kubernetes.Interface
	o       Options
	tr      *tracker
	readers []*ruleReader
	metrics []*http.Client // per node, see metricsClient
	// start is each node's histogram when the events began; hist is
	// every observation since, on all nodes (scraped after the events).
	start []histogram
	hist  histogram
	reads []float64 // every read's cost, seconds
}

// Measure runs o.Events scale events on a bed where o.Proxy is installed
// and returns what every node saw. The record holds the events measured
// so far when an event fails.
func Measure(ctx context.Context, c *cluster.Cluster, o Options) (rec Record, err error) {
	o = o.withDefaults()
	rec = Record{Proxy: o.Proxy.Name, Kind: o.Proxy.Kind, Mode: o.Proxy.Mode, Run: o.Run, Nodes: c.Nodes(), Started: time.Now()}
	m := &measurement{c: c, o: o}
	defer func() {
		rec.summarize(m.hist, m.reads)
		if err != nil {
			rec.Err = err.Error()
		}
	}()
	if m.cs, err = c.Clientset(); err != nil {
		return rec, err
	}
	if err := c.Apply(ctx, "latency-workload", cluster.AgnhostWorkload(o.Namespace, workloadName, o.Base, int(o.ReadyDelay/time.Second))); err != nil {
		return rec, err
	}
	defer func() {
		// The bed may go on (a test's next step): leave it as found.
		dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
		defer cancel()
		if _, derr := c.Kubectl(dctx, "delete", "namespace", o.Namespace, "--wait=false"); derr != nil {
			err = errors.Join(err, derr)
		}
	}()
	wctx, stop := context.WithCancel(ctx)
	defer stop()
	if m.tr, err = startTracker(wctx, m.cs, o.Namespace, workloadName); err != nil {
		return rec, err
	}
	if err := m.prepare(ctx); err != nil {
		return rec, err
	}
	o.Logger.Info("latency: measuring", "proxy", o.Proxy.Name, "run", o.Run, "events", o.Events, "nodes", c.Nodes())
	for i := range o.Events {
		ev, err := m.runEvent(ctx, i)
		if err != nil {
			return rec, err
		}
		rec.Events = append(rec.Events, ev)
		o.Logger.Debug("latency: event", "proxy", o.Proxy.Name, "index", i, "direction", ev.Direction,
			"seconds", ev.Seconds, "fromSlice", ev.FromSliceSeconds, "pod", ev.Pod)
		if (i+1)%10 == 0 {
			o.Logger.Info("latency: progress", "proxy", o.Proxy.Name, "run", o.Run, "events", i+1, "of", o.Events)
		}
	}
	if m.hist, err = m.observedSinceStart(ctx); err != nil {
		return rec, err
	}
	return rec, nil
}

// scrapeAll reads every node's histogram.
func (m *measurement) scrapeAll(ctx context.Context) ([]histogram, error) {
	hs := make([]histogram, len(m.metrics))
	for n, client := range m.metrics {
		h, err := scrapeHistogram(ctx, client)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", cluster.NodeName(n), err)
		}
		hs[n] = h
	}
	return hs, nil
}

// observedSinceStart is every observation the nodes' proxies made since
// prepare's scrape. Counted over the whole run, not as the sum of the
// events' own differences: an event's "before" scrape races the proxy's
// sync (a 30 ms sync can land before a loaded node's scrape returns) and
// a scale-up's not-ready sync falls between two events, so those sums
// miss observations, all of them on a busy machine.
func (m *measurement) observedSinceStart(ctx context.Context) (histogram, error) {
	end, err := m.scrapeAll(ctx)
	if err != nil {
		return histogram{}, fmt.Errorf("the histograms after the events: %w", err)
	}
	var sum histogram
	for n, h := range end {
		sum.add(h.minus(m.start[n]))
	}
	return sum, nil
}

// prepare waits until the base replicas are ready endpoints, resolves
// every node's service chain and waits until each holds them all.
func (m *measurement) prepare(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, 3*time.Minute)
	defer cancel()
	var ips []string
	if _, err := m.tr.wait(ctx, fmt.Sprintf("%d ready endpoints", m.o.Base), func(pods map[string]*podTimes) *podTimes {
		ips = ips[:0]
		var last *podTimes
		for _, p := range pods {
			if !p.SliceReadySeen.IsZero() && p.SliceUnreadySeen.IsZero() && p.DeletionSeen.IsZero() && p.IP != "" {
				ips = append(ips, p.IP)
				last = p
			}
		}
		if len(ips) == m.o.Base {
			return last
		}
		return nil
	}); err != nil {
		return err
	}
	vip, err := m.c.ServiceAddr(ctx, m.o.Namespace, workloadName)
	if err != nil {
		return err
	}
	m.readers = make([]*ruleReader, m.c.Nodes())
	m.metrics = make([]*http.Client, m.c.Nodes())
	for n := range m.readers {
		m.metrics[n] = metricsClient(m.c, n)
		var last error
		for m.readers[n] == nil {
			r, err := resolveReader(ctx, m.c, n, m.o.Proxy, vip)
			if err == nil {
				out, rerr := r.read(ctx)
				if err = rerr; err == nil && holdsAll(out, ips) {
					m.readers[n] = r
					m.o.Logger.Debug("latency: the service's rules", "node", cluster.NodeName(n), "rules", string(out))
					break
				}
			}
			last = err
			select {
			case <-ctx.Done():
				return fmt.Errorf("node %d: the Service %s never programmed with %v: %w (last: %v)", n, vip, ips, context.Cause(ctx), last)
			case <-time.After(100 * time.Millisecond):
			}
		}
		m.o.Logger.Info("latency: service chain", "node", cluster.NodeName(n), "chain", m.readers[n].chain, "vip", vip)
	}
	select {
	case <-ctx.Done():
		return context.Cause(ctx)
	case <-time.After(m.o.Gap):
	}
	if m.start, err = m.scrapeAll(ctx); err != nil {
		return fmt.Errorf("the histograms before the events: %w", err)
	}
	return nil
}

// holdsAll reports whether out holds every address of ips; one that is
// not an address is never held, so the wait for it times out naming it.
func holdsAll(out []byte, ips []string) bool {
	for _, ip := range ips {
		a, err := netip.ParseAddr(ip)
		if err != nil || !ruleread.HoldsAddr(out, a) {
			return false
		}
	}
	return true
}
