package syncer

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/switchyard-proxy/switchyard/nodeagent/internal/metrics"
	"github.com/switchyard-proxy/switchyard/nodeagent/internal/view"
)

// observed is the agent's kubeproxy_network_programming_duration_seconds:
// its count and sum.
func observed(t *testing.T, m *metrics.Metrics) (count uint64, sum float64) {
	t.Helper()
	mfs, err := m.Registry().Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == "kubeproxy_network_programming_duration_seconds" {
			h := mf.GetMetric()[0].GetHistogram()
			return h.GetSampleCount(), h.GetSampleSum()
		}
	}
	t.Fatal("no kubeproxy_network_programming_duration_seconds")
	return 0, 0
}

// TestProgrammingLatency: the agent observes the trigger times sent with
// an update's resources, each once, from the moment its kernel change
// returned, and reports the largest in its ACK; kube-proxy's rule drops
// those from before the agent's start and those in the future, and an
// update without any (a stream's first batch, a restored view, a
// Service-only change, a slice deletion) observes and reports nothing.
func TestProgrammingLatency(t *testing.T) {
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC) // the harness clock's start
	applyAt := start.Add(10 * time.Second)
	future := time.Date(2099, 1, 1, 0, 0, 0, 0, time.UTC)
	tests := []struct {
		name       string
		triggers   map[string][]time.Time
		wantObs    []time.Duration // observations, in any order
		wantReport time.Duration   // 0: none reported
	}{
		{name: "no trigger times"},
		{name: "one slice change", triggers: map[string][]time.Time{"ns/a": {applyAt.Add(-300 * time.Millisecond)}},
			wantObs: []time.Duration{300 * time.Millisecond}, wantReport: 300 * time.Millisecond},
		{name: "two changes coalesced, the ACK reports the oldest",
			triggers: map[string][]time.Time{"ns/a": {applyAt.Add(-2 * time.Second)}, "ns/b": {applyAt.Add(-time.Second)}},
			wantObs:  []time.Duration{2 * time.Second, time.Second}, wantReport: 2 * time.Second},
		{name: "before the agent started", triggers: map[string][]time.Time{"ns/a": {start.Add(-3 * time.Hour)}}},
		{name: "in the future", triggers: map[string][]time.Time{"ns/a": {future}}},
		{name: "a future time beside a real one", triggers: map[string][]time.Time{"ns/a": {future}, "ns/b": {applyAt.Add(-time.Second)}},
			wantObs: []time.Duration{time.Second}, wantReport: time.Second},
		{name: "for a resource the update does not carry", triggers: map[string][]time.Time{"ns/gone": {applyAt.Add(-time.Second)}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			m := metrics.New()
			h := newHarness(t, nil, false, func(_ *harness, c *Config) { c.Metrics = m })
			h.clk.SetTime(applyAt)
			u := update("s1", svc("ns/a", "1"), svc("ns/b", "1"))
			u.Triggers = tc.triggers
			applied, err := h.s.Apply(t.Context(), u)
			if err != nil {
				t.Fatal(err)
			}
			count, sum := observed(t, m)
			var wantSum float64
			for _, d := range tc.wantObs {
				wantSum += d.Seconds()
			}
			if count != uint64(len(tc.wantObs)) || !nearly(sum, wantSum) {
				t.Errorf("observed %d, sum %.3fs; want %d, sum %.3fs", count, sum, len(tc.wantObs), wantSum)
			}
			want := view.Applied{Duration: applied.Duration, Mode: applied.Mode,
				ProgrammingLatency: tc.wantReport, HasLatency: tc.wantReport > 0}
			if diff := cmp.Diff(want, applied); diff != "" {
				t.Errorf("report (-want +got):\n%s", diff)
			}
		})
	}
}

func nearly(a, b float64) bool { return a-b < 1e-9 && b-a < 1e-9 }
