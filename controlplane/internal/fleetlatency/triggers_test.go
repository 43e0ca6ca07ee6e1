package fleetlatency_test

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/switchyard-proxy/switchyard/controlplane/internal/fleetlatency"
)

// TestTrackerTriggers: which trigger times a node's view brings. kube-proxy
// observes a trigger only for a change made while it runs, never one from
// before its start nor one in the future; here the control plane keeps only
// those, and a stream asks for the changes published since its node's
// previous view that reached the node.
func TestTrackerTriggers(t *testing.T) {
	start := time.Date(2026, 12, 6, 10, 0, 0, 0, time.UTC)
	now := start.Add(time.Hour)
	type update struct {
		changed, removed []string
		triggers         map[string]fleetlatency.Trigger
	}
	one := func(name string, tr fleetlatency.Trigger) update {
		return update{changed: []string{name}, triggers: map[string]fleetlatency.Trigger{name: tr}}
	}
	at := func(d time.Duration) []time.Time { return []time.Time{now.Add(-d)} }
	tests := []struct {
		name         string
		updates      []update // generations 1, 2, ...
		since, until uint64
		node         string
		want         []time.Time
	}{
		{name: "a change's time", updates: []update{one("web/front", fleetlatency.Trigger{Times: at(time.Second)})},
			since: 1, until: 1, want: at(time.Second)},
		{name: "a stream's first batch (since 0)", updates: []update{one("web/front", fleetlatency.Trigger{Times: at(time.Second)})},
			since: 0, until: 1},
		{name: "before the control plane started", updates: []update{one("web/front", fleetlatency.Trigger{Times: []time.Time{start.Add(-time.Second)}})},
			since: 1, until: 1},
		{name: "in the future", updates: []update{one("web/front", fleetlatency.Trigger{Times: []time.Time{now.Add(time.Second), time.Date(2099, 1, 1, 0, 0, 0, 0, time.UTC)}})},
			since: 1, until: 1},
		{name: "a future time does not silence a later change", updates: []update{
			one("web/front", fleetlatency.Trigger{Times: []time.Time{time.Date(2099, 1, 1, 0, 0, 0, 0, time.UTC)}}),
			one("web/front", fleetlatency.Trigger{Times: at(time.Second)}),
		}, since: 1, until: 2, want: at(time.Second)},
		{name: "Service-only change: no times", updates: []update{{changed: []string{"web/front"}}}, since: 1, until: 1},
		{name: "the node's previous view had it", updates: []update{
			one("web/front", fleetlatency.Trigger{Times: at(time.Hour / 2)}), one("web/back", fleetlatency.Trigger{Times: at(time.Second)}),
		}, since: 2, until: 2},
		{name: "published after the view was taken", updates: []update{
			one("web/front", fleetlatency.Trigger{Times: at(2 * time.Second)}), one("web/front", fleetlatency.Trigger{Times: at(time.Second)}),
		}, since: 1, until: 1, want: at(2 * time.Second)},
		{name: "coalesced changes, oldest first", updates: []update{
			one("web/front", fleetlatency.Trigger{Times: at(time.Second)}), one("web/front", fleetlatency.Trigger{Times: []time.Time{now.Add(-3 * time.Second), now.Add(-2 * time.Second)}}),
		}, since: 1, until: 2, want: []time.Time{now.Add(-3 * time.Second), now.Add(-2 * time.Second), now.Add(-time.Second)}},
		{name: "a change that reached other nodes only", updates: []update{one("web/front", fleetlatency.Trigger{Times: at(time.Second), Nodes: []string{"node-b", "node-c"}})},
			since: 1, until: 1, node: "node-a"},
		{name: "a change that reached this node", updates: []update{one("web/front", fleetlatency.Trigger{Times: at(time.Second), Nodes: []string{"node-c", "node-a"}})},
			since: 1, until: 1, node: "node-a", want: at(time.Second)},
		{name: "service removed", updates: []update{one("web/front", fleetlatency.Trigger{Times: at(time.Second)}), {removed: []string{"web/front"}}},
			since: 1, until: 2},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			clk := clocktesting.NewFakePassiveClock(start)
			tr := fleetlatency.New(fleetlatency.WithClock(clk))
			clk.SetTime(now)
			for _, u := range tc.updates {
				tr.ServicesChanged(u.changed, u.removed, u.triggers)
			}
			node := tc.node
			if node == "" {
				node = "node-a"
			}
			if diff := cmp.Diff(tc.want, tr.Triggers("web/front", tc.since, tc.until, node)); diff != "" {
				t.Errorf("Triggers (-want +got):\n%s", diff)
			}
		})
	}
}

// TestTriggersBounded: a service keeps its 16 most recent changes' times;
// a node further behind observes only those.
func TestTriggersBounded(t *testing.T) {
	start := time.Date(2026, 12, 6, 10, 0, 0, 0, time.UTC)
	clk := clocktesting.NewFakePassiveClock(start)
	tr := fleetlatency.New(fleetlatency.WithClock(clk))
	for i := range 20 {
		clk.SetTime(start.Add(time.Duration(i+1) * time.Second))
		tr.ServicesChanged([]string{"web/front"}, nil, map[string]fleetlatency.Trigger{"web/front": {Times: []time.Time{clk.Now()}}})
	}
	got := tr.Triggers("web/front", 1, 20, "node-a")
	if len(got) != 16 || !got[0].Equal(start.Add(5*time.Second)) || !got[15].Equal(start.Add(20*time.Second)) {
		t.Errorf("Triggers after 20 changes = %d times (%v … %v), want the newest 16 (5s … 20s after start)", len(got), got[0], got[len(got)-1])
	}
}

// TestGenerationPerUpdate: every update is a new generation, also one that
// changed no service (a Node's or a NodeConfig's), so the views it
// publishes never share a generation with views taken before.
func TestGenerationPerUpdate(t *testing.T) {
	tr := fleetlatency.New()
	tr.ServicesChanged(nil, nil, nil)
	tr.ServicesChanged([]string{"web/front"}, nil, nil)
	tr.ServicesChanged(nil, nil, nil)
	if got := tr.Generation(); got != 3 {
		t.Errorf("Generation after 3 updates = %d, want 3", got)
	}
}
