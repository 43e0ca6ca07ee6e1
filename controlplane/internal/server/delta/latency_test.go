package delta_test

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/switchyard-proxy/switchyard/controlplane/internal/cache"
	"github.com/switchyard-proxy/switchyard/controlplane/internal/cache/cachetest"
	"github.com/switchyard-proxy/switchyard/controlplane/internal/fleetlatency"
	"github.com/switchyard-proxy/switchyard/controlplane/internal/server/servertest"
	"github.com/switchyard-proxy/switchyard/controlplane/internal/server/stream"
)

// TestFleetLatencyThroughTheStream: with the fleet latency tracker wired
// into the cache, as the daemon wires it, an agent's ACK of a change
// counts once for the changed service; its first ACK (the resync) and the
// services that did not change count for nothing.
func TestFleetLatencyThroughTheStream(t *testing.T) {
	tr := fleetlatency.New()
	c := cache.New(cache.WithApplyObserver(tr))
	nv1 := cachetest.NewNodeView(svc(t, 0, 0), svc(t, 1, 0), svc(t, 2, 0))
	c.Publish("n1", nv1, nil)
	h := start(t, c, stream.Options{})
	cl := h.openAcked(t, "n1", nv1)

	tr.ServicesChanged([]string{"ns/svc-001"}, nil, nil)
	nv2 := nv1.With(svc(t, 1, 1))
	c.Publish("n1", nv2, []string{"ns/svc-001"})
	r := cl.Recv()
	cl.Ack(r, nil)
	servertest.WaitAcked(t, h.cache, "n1", nv2.Version())

	if st, ok := tr.Service("ns/svc-001"); !ok || st.Samples != 1 || st.Quantile(0.99) <= 0 {
		t.Errorf("ns/svc-001: %+v, %v; want one sample", st, ok)
	}
	for _, name := range []string{"ns/svc-000", "ns/svc-002"} {
		if _, ok := tr.Service(name); ok {
			t.Errorf("%s has a latency entry, but never changed", name)
		}
	}
}

// triggersOf is a response's trigger times by resource name.
func triggersOf(r *response) map[string][]time.Time {
	out := map[string][]time.Time{}
	for _, ct := range r.GetChangeTriggers() {
		for _, ts := range ct.GetTriggerTimes() {
			out[ct.GetName()] = append(out[ct.GetName()], ts.AsTime())
		}
	}
	return out
}

// TestChangeTriggersThroughTheStream: a response carries, beside the
// resources it changes, the trigger times of the slice changes that made
// them, and nothing else: not at a stream's first batch (a connect is no
// change, even right after one), not for a Service-only change, and the
// same times again when a NACKed batch is sent again.
func TestChangeTriggersThroughTheStream(t *testing.T) {
	tr := fleetlatency.New()
	c := cache.New(cache.WithApplyObserver(tr))
	nv1 := cachetest.NewNodeView(svc(t, 0, 0), svc(t, 1, 0))
	// Trigger times are kept from the Tracker's start, never in the future.
	trigger := time.Now().UTC()
	// A change just before the agent connects: its first batch brings it,
	// as part of a resync, with no time.
	tr.ServicesChanged([]string{"ns/svc-001"}, nil, map[string]fleetlatency.Trigger{"ns/svc-001": {Times: []time.Time{trigger}}})
	c.Publish("n1", nv1, nil)
	h := start(t, c, stream.Options{NackRetry: 10 * time.Millisecond, Triggers: tr})
	cl := h.open(t, "n1", nil, true)
	first := cl.Recv()
	if got := triggersOf(first); len(got) != 0 {
		t.Errorf("first batch carries trigger times %v, want none", got)
	}
	cl.Ack(first, nil)
	servertest.WaitAcked(t, h.cache, "n1", nv1.Version())

	// A slice change of svc-001: its time, on svc-001 only.
	trigger2 := time.Now().UTC()
	tr.ServicesChanged([]string{"ns/svc-001"}, nil, map[string]fleetlatency.Trigger{"ns/svc-001": {Times: []time.Time{trigger2}}})
	nv2 := nv1.With(svc(t, 1, 1))
	c.Publish("n1", nv2, []string{"ns/svc-001"})
	want := map[string][]time.Time{"ns/svc-001": {trigger2}}
	r := cl.Recv()
	if diff := cmp.Diff(want, triggersOf(r)); diff != "" {
		t.Errorf("change (-want +got):\n%s", diff)
	}
	// Rejected, then sent again after the backoff: the same times, since
	// the agent observes only what it applied.
	cl.nack(r.GetNonce(), "xtables lock held")
	r = cl.Recv()
	if diff := cmp.Diff(want, triggersOf(r)); diff != "" {
		t.Errorf("retry after a NACK (-want +got):\n%s", diff)
	}
	cl.Ack(r, nil)
	servertest.WaitAcked(t, h.cache, "n1", nv2.Version())

	// A Service-only change (no slice changed): no time.
	tr.ServicesChanged([]string{"ns/svc-000"}, nil, nil)
	nv3 := nv2.With(svc(t, 0, 1))
	c.Publish("n1", nv3, []string{"ns/svc-000"})
	r = cl.Recv()
	if got := triggersOf(r); len(got) != 0 {
		t.Errorf("Service-only change carries %v, want none", got)
	}
	cl.Ack(r, nil)
	servertest.WaitAcked(t, h.cache, "n1", nv3.Version())
}

// TestNodeWithoutNodeObject: when a node's view goes (its Node object was
// deleted) while its agent stays connected, the stream sends nothing, the
// agent keeps what it applied, and the node is counted as without a Node
// until the view is back, when the agent converges at once.
func TestNodeWithoutNodeObject(t *testing.T) {
	c, nv1 := servertest.Published("n1", svc(t, 0, 0), svc(t, 1, 0))
	h := start(t, c, stream.Options{})
	cl := h.openAcked(t, "n1", nv1)

	c.Remove("n1")
	servertest.Eventually(t, "counted without a Node", func() bool { return h.obs.missing.Load() == 1 })
	if st := h.status("n1"); st.Known || !st.Connected || st.AckedVersion != nv1.Version() {
		t.Errorf("status without a Node: known %v, connected %v, acked %q; want unknown, connected, still %q",
			st.Known, st.Connected, st.AckedVersion, nv1.Version())
	}
	select {
	case r := <-cl.Responses():
		t.Fatalf("a response without a Node object: %v", r)
	case <-time.After(50 * time.Millisecond):
	}

	nv2 := nv1.With(svc(t, 1, 1))
	c.Publish("n1", nv2, nil)
	r := cl.Recv()
	cl.Ack(r, nil)
	servertest.WaitAcked(t, h.cache, "n1", nv2.Version())
	if got := h.obs.missing.Load(); got != 0 {
		t.Errorf("%d agents counted without a Node once it is back, want 0", got)
	}

	c.Remove("n1")
	servertest.Eventually(t, "counted again", func() bool { return h.obs.missing.Load() == 1 })
	cl.Cancel()
	servertest.Eventually(t, "uncounted when the stream ends", func() bool { return h.obs.missing.Load() == 0 })
}
