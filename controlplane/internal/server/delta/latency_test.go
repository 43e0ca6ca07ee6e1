package delta_test

import (
	"testing"

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

	tr.ServicesChanged([]string{"ns/svc-001"}, nil)
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
