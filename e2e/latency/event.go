package latency

import (
	"context"
	"fmt"
	"net/netip"
	"time"

	"golang.org/x/sync/errgroup"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"

	"github.com/switchyard-proxy/switchyard/e2e/cluster"
	"github.com/switchyard-proxy/switchyard/e2e/testbed/ruleread"
)

// nodePoll is one node's reads during one event.
type nodePoll struct {
	seen      time.Time // end of the first read that saw the change
	lastMiss  time.Time // start of the last read that did not
	reads     int
	readCosts []time.Duration
	// before is the node's histogram at the start, scraped beside the
	// first reads; beforeAt is when that scrape returned.
	before   histogram
	beforeAt time.Time
}

// poll reads r until its output holds ip (want) or no longer does
// (!want), pausing between reads. A read that fails (the chain being
// rewritten, a busy lock) counts as not seen and is retried.
func poll(ctx context.Context, r *ruleReader, ip string, want bool, pause time.Duration) (nodePoll, error) {
	var p nodePoll
	addr, err := netip.ParseAddr(ip)
	if err != nil {
		return p, fmt.Errorf("node %d: the pod's address: %w", r.node, err)
	}
	var lastErr error
	for {
		begin := time.Now()
		out, err := r.read(ctx)
		end := time.Now()
		p.reads++
		p.readCosts = append(p.readCosts, end.Sub(begin))
		if err == nil && ruleread.HoldsAddr(out, addr) == want {
			p.seen = end
			return p, nil
		}
		if err != nil {
			lastErr = err
		}
		p.lastMiss = begin
		select {
		case <-ctx.Done():
			what := "the removal of"
			if want {
				what = "the addition of"
			}
			return p, fmt.Errorf("node %d: waiting for %s %s in chain %s: %w (last read error: %v)", r.node, what, ip, r.chain, context.Cause(ctx), lastErr)
		case <-time.After(pause):
		}
	}
}

// eventRun is one scale event in progress.
type eventRun struct {
	m       *measurement
	ev      Event
	up      bool
	pod     podTimes
	start   time.Time // the pod's Ready (up) or deletion (down) seen
	sliceAt time.Time // the slice's change seen
	polls   []nodePoll
}

// runEvent makes event i: one replica more (even i) or one less (odd i),
// and measures it on every node.
func (m *measurement) runEvent(ctx context.Context, i int) (Event, error) {
	ctx, cancel := context.WithTimeout(ctx, m.o.EventTimeout)
	defer cancel()
	e := &eventRun{m: m, up: i%2 == 0, ev: Event{Index: i, Direction: Down, Replicas: m.o.Base}}
	if e.up {
		e.ev.Direction, e.ev.Replicas = Up, m.o.Base+1
	}
	for _, step := range []func(context.Context) error{e.trigger, e.measureNodes, e.settle, e.results} {
		if err := step(ctx); err != nil {
			return e.ev, fmt.Errorf("event %d (%s %s): %w", i, e.ev.Direction, e.pod.Name, err)
		}
	}
	return e.ev, nil
}

// trigger scales the Deployment and waits for the start: a pod that was
// not there before seen Ready (up), or a pod seen deleted (down).
func (e *eventRun) trigger(ctx context.Context) error {
	known := e.m.tr.names()
	action := time.Now()
	if err := scale(ctx, e.m.cs, e.m.o.Namespace, e.ev.Replicas); err != nil {
		return err
	}
	var err error
	if e.up {
		e.pod, err = e.m.tr.wait(ctx, "a new pod Ready", func(pods map[string]*podTimes) *podTimes {
			for name, p := range pods {
				if !known[name] && !p.ReadySeen.IsZero() && p.IP != "" {
					return p
				}
			}
			return nil
		})
		e.start = e.pod.ReadySeen
	} else {
		e.pod, err = e.m.tr.wait(ctx, "a pod deleted", func(pods map[string]*podTimes) *podTimes {
			for _, p := range pods {
				if p.DeletionSeen.After(action) && p.IP != "" {
					return p
				}
			}
			return nil
		})
		e.start = e.pod.DeletionSeen
	}
	e.ev.Pod, e.ev.PodIP, e.ev.PodNode = e.pod.Name, e.pod.IP, e.pod.Node
	e.ev.ActionToStartSeconds = seconds(e.start.Sub(action))
	return err
}

// measureNodes polls every node until its rules show the change, with
// each node's histogram scraped beside the first reads: in front of them
// the scrape would delay the first read past a fast proxy's sync.
func (e *eventRun) measureNodes(ctx context.Context) error {
	e.polls = make([]nodePoll, len(e.m.readers))
	g, ctx := errgroup.WithContext(ctx)
	for n, r := range e.m.readers {
		g.Go(func() error {
			type scraped struct {
				h   histogram
				at  time.Time
				err error
			}
			ch := make(chan scraped, 1)
			go func() {
				h, err := scrapeHistogram(ctx, e.m.metrics[n])
				ch <- scraped{h, time.Now(), err}
			}()
			p, err := poll(ctx, r, e.pod.IP, e.up, e.m.o.ReadPause)
			s := <-ch
			if err == nil && s.err != nil {
				err = fmt.Errorf("%s: %w", cluster.NodeName(n), s.err)
			}
			p.before, p.beforeAt = s.h, s.at
			e.polls[n] = p
			return err
		})
	}
	return g.Wait()
}

// settle waits for the slice change (the proxies acted on it, so the
// harness's watch has it or is about to) and, for a scale-down, for the
// pod to be gone, so that the next event starts from the same state;
// then the gap.
func (e *eventRun) settle(ctx context.Context) error {
	pod, err := e.m.tr.wait(ctx, "the EndpointSlice change", func(pods map[string]*podTimes) *podTimes {
		p := pods[e.pod.Name]
		if e.up && !p.SliceReadySeen.IsZero() || !e.up && !p.SliceUnreadySeen.IsZero() && !p.Gone.IsZero() {
			return p
		}
		return nil
	})
	if err != nil {
		return err
	}
	e.sliceAt = pod.SliceReadySeen
	if !e.up {
		e.sliceAt = pod.SliceUnreadySeen
	}
	e.ev.SliceAfterStartSeconds = seconds(e.sliceAt.Sub(e.start))
	select {
	case <-ctx.Done():
		return fmt.Errorf("settling: %w", context.Cause(ctx))
	case <-time.After(e.m.o.Gap):
		return nil
	}
}

// results scrapes every node's histogram again and fills the event's
// per-node results; the slowest node's time is the event's.
func (e *eventRun) results(ctx context.Context) error {
	for n, p := range e.polls {
		after, err := scrapeHistogram(ctx, e.m.metrics[n])
		if err != nil {
			return fmt.Errorf("%s: %w", cluster.NodeName(n), err)
		}
		d := after.minus(p.before)
		res := NodeResult{Node: cluster.NodeName(n), Seconds: seconds(p.seen.Sub(e.start)), FromSliceSeconds: seconds(p.seen.Sub(e.sliceAt)),
			Reads: p.reads, FirstRead: p.lastMiss.IsZero(), MetricCount: d.Count, MetricSum: round(d.Sum)}
		if !p.lastMiss.IsZero() {
			res.ResolutionSeconds = seconds(p.seen.Sub(p.lastMiss))
		}
		if e.up {
			res.FromTransitionSeconds = seconds(p.seen.Sub(e.pod.ReadyTransition))
		}
		// One observation, and the "before" scrape returned before the
		// last read that still missed the change began (so before the
		// proxy's commit and the observation that follows it): that
		// observation is this event's.
		if d.Count == 1 && !p.lastMiss.IsZero() && p.beforeAt.Before(p.lastMiss) {
			res.MetricSeconds = round(d.Sum)
		}
		for _, c := range p.readCosts {
			e.m.reads = append(e.m.reads, c.Seconds())
		}
		if n == 0 || res.Seconds > e.ev.Seconds {
			e.ev.Seconds = res.Seconds
		}
		if n == 0 || res.FromSliceSeconds > e.ev.FromSliceSeconds {
			e.ev.FromSliceSeconds = res.FromSliceSeconds
		}
		e.ev.Nodes = append(e.ev.Nodes, res)
	}
	return nil
}

// scale sets the Deployment's replicas.
func scale(ctx context.Context, cs kubernetes.Interface, ns string, replicas int) error {
	patch := fmt.Appendf(nil, `{"spec":{"replicas":%d}}`, replicas)
	if _, err := cs.AppsV1().Deployments(ns).Patch(ctx, workloadName, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
		return fmt.Errorf("scale %s/%s to %d: %w", ns, workloadName, replicas, err)
	}
	return nil
}
