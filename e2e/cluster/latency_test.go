package cluster_test

import (
	"context"
	"testing"
	"time"

	"github.com/switchyard-proxy/switchyard/e2e/cluster"
	"github.com/switchyard-proxy/switchyard/e2e/latency"
)

// smokeEvents is what the smoke runs measure: enough for both directions
// twice, few enough to cost seconds.
const smokeEvents = 5

// TestLatencySmoke runs the network-programming latency harness
// (package latency, make latency) for a few scale events against
// Switchyard in nftables mode, the way the measurement does, and checks
// that it produces sane per-node numbers. Speed is never judged here; the
// kube-proxy side (its iptables mode) runs in TestKubeProxyOnBed, on the
// bed it already has.
func TestLatencySmoke(t *testing.T) {
	c := cluster.Start(t, cluster.Config{Nodes: 2})
	p, err := cluster.ParseProxy("switchyard-nftables")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Minute)
	defer cancel()
	if err := c.InstallProxy(ctx, p, cluster.OverlayBase); err != nil {
		t.Fatal(err)
	}
	latencySmoke(t, c, p)
}

// latencySmoke measures smokeEvents events on c, where p is installed,
// and checks the record: every event in order, on every node, with a
// positive time, at least one read and the proxy's own histogram seen.
func latencySmoke(t *testing.T, c *cluster.Cluster, p cluster.Proxy) {
	t.Helper()
	rec, err := latency.Measure(t.Context(), c, latency.Options{Proxy: p, Events: smokeEvents, EventTimeout: time.Minute})
	if err != nil {
		t.Fatalf("%s: %v", p.Name, err)
	}
	if len(rec.Events) != smokeEvents || rec.All.N != smokeEvents {
		t.Fatalf("%s: %d events (stats over %d), want %d", p.Name, len(rec.Events), rec.All.N, smokeEvents)
	}
	for i, e := range rec.Events {
		want := latency.Up
		if i%2 == 1 {
			want = latency.Down
		}
		if e.Direction != want || e.PodIP == "" || len(e.Nodes) != c.Nodes() {
			t.Errorf("event %d: %s of %q (%s), %d node results; want %s on %d nodes", i, e.Direction, e.Pod, e.PodIP, len(e.Nodes), want, c.Nodes())
		}
		seen := map[string]bool{}
		for _, n := range e.Nodes {
			if n.Seconds <= 0 || n.Seconds > time.Minute.Seconds() || n.Reads < 1 || seen[n.Node] {
				t.Errorf("event %d, %s: %+v (want a positive time under a minute, reads, one result per node)", i, n.Node, n)
			}
			seen[n.Node] = true
		}
		t.Logf("%s event %d %-4s %s on %s: every node %.0f ms (from the slice %.0f ms; start %.0f ms after the scale call)",
			p.Name, i, e.Direction, e.Pod, e.PodNode, e.Seconds*1000, e.FromSliceSeconds*1000, e.ActionToStartSeconds*1000)
	}
	if rec.Metric.Observations == 0 {
		t.Errorf("%s: no observation in the proxies' network-programming histograms", p.Name)
	}
	if rec.ReadMedianSeconds <= 0 {
		t.Errorf("%s: no read cost recorded", p.Name)
	}
	t.Logf("%s: p50 %.0f ms, max %.0f ms; histogram %v observations, attributed %d (p50 %.0f ms; harness from the same start %.0f ms); read %.1f ms",
		p.Name, rec.All.P50*1000, rec.All.Max*1000, rec.Metric.Observations, rec.Metric.Attributed.N,
		rec.Metric.Attributed.P50*1000, rec.Metric.Harness.P50*1000, rec.ReadMedianSeconds*1000)
}
