package system_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/switchyard-proxy/switchyard/e2e/testbed/probe"
)

// TestSoakStats: nearest-rank percentiles, and nothing from nothing.
func TestSoakStats(t *testing.T) {
	var ds []time.Duration
	for i := 100; i >= 1; i-- {
		ds = append(ds, time.Duration(i)*time.Millisecond)
	}
	want := stats{N: 100, P50: msDuration(50 * time.Millisecond), P99: msDuration(99 * time.Millisecond), Max: msDuration(100 * time.Millisecond)}
	if diff := cmp.Diff(want, statsOf(ds)); diff != "" {
		t.Errorf("statsOf(1..100 ms) (-want +got):\n%s", diff)
	}
	if got := statsOf([]time.Duration{3 * time.Second}); got.P50 != got.Max || got.P99 != got.Max || got.N != 1 {
		t.Errorf("statsOf(one) = %+v, want every figure the one value", got)
	}
	if got := statsOf(nil); got != (stats{}) {
		t.Errorf("statsOf(nil) = %+v, want zero", got)
	}
}

// TestSoakWindows: failures of every stream, in the soak's time (a
// timeout from when its attempt began), grouped into windows, each named
// after the kill or restart before it, the faults in progress and the
// change before it.
func TestSoakWindows(t *testing.T) {
	start := time.Date(2026, 12, 1, 19, 0, 0, 0, time.UTC)
	sec := func(s float64) time.Duration { return time.Duration(s * float64(time.Second)) }
	streams := []streamResult{
		{source: "node-0", start: start, res: probe.Result{Failures: []probe.Failure{
			{At: sec(10.5), Reason: probe.ReasonRefused, Err: errors.New("refused")},
			{At: sec(13.2), Reason: probe.ReasonTimeout, Err: errors.New("i/o timeout")}, // began at 11.2
		}}},
		{source: "client", start: start.Add(sec(1)), res: probe.Result{Failures: []probe.Failure{
			{At: sec(40), Reason: probe.ReasonReset, Err: errors.New("reset")}, // 41 s into the soak
		}}},
	}
	faults := []faultRecord{
		{Kind: kindAgent, Target: "agent/node-0", KilledAt: msDuration(sec(9)), RestartedAt: msDuration(sec(10)),
			Recovered: true, Recovery: msDuration(sec(2))},
		{Kind: kindAPIServer, Target: "apiserver", KilledAt: msDuration(sec(30)), RestartedAt: msDuration(sec(50))},
	}
	changes := []changeRecord{{Kind: changeScale, Service: "demo/echo", At: msDuration(sec(5))}}
	got := windows(failures(start, streams), faults, changes, sec(60))
	want := []failureWindow{
		{Start: msDuration(sec(10.5)), End: msDuration(sec(11.2)), Failures: 2,
			BySource: map[string]int{"node-0": 2}, Reasons: map[string]int{"refused": 1, "timeout": 1}, FirstError: "refused",
			AfterFault: &eventRef{Event: "restart agent/node-0", Before: msDuration(sec(0.5))}, InProgress: []string{"agent/node-0"},
			AfterChange: &eventRef{Event: "scale demo/echo", Before: msDuration(sec(5.5))}},
		{Start: msDuration(sec(41)), End: msDuration(sec(41)), Failures: 1,
			BySource: map[string]int{"client": 1}, Reasons: map[string]int{"reset": 1}, FirstError: "reset",
			// The API server never recovered: in progress until the end.
			AfterFault: &eventRef{Event: "kill apiserver", Before: msDuration(sec(11))}, InProgress: []string{"apiserver"},
			AfterChange: &eventRef{Event: "scale demo/echo", Before: msDuration(sec(36))}},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("windows (-want +got):\n%s", diff)
	}
}

// TestSoakConvergenceRows: a change counts as under a fault when its
// convergence overlaps one; unwritten changes count nowhere.
func TestSoakConvergenceRows(t *testing.T) {
	sec := func(s float64) msDuration { return msDuration(time.Duration(s * float64(time.Second))) }
	changes := []changeRecord{
		{Kind: changeScale, At: sec(1), ToAck: sec(0.1), ToTraffic: sec(0.2), Converged: true},
		{Kind: changeAdd, At: sec(20), ToAck: sec(4), ToTraffic: sec(3), Converged: true}, // overlaps the kill at 22 s
		{Kind: changeRemove, At: sec(40), Error: "API down"},
	}
	faults := []faultRecord{{Kind: kindAgent, Target: "agent/node-1", KilledAt: sec(22), RestartedAt: sec(25), Recovered: true, Recovery: sec(1)}}
	rows := convergenceRows(changes, faults, 60*time.Second)
	got := map[string][2]int{}
	for _, r := range rows {
		got[r.Changes] = [2]int{r.Written, int(time.Duration(r.Both.Max) / time.Millisecond)}
	}
	want := map[string][2]int{
		"all": {2, 4000}, changeScale: {1, 200}, changeAdd: {1, 4000}, changeRemove: {0, 0},
		"no fault in progress": {1, 200}, "a fault in progress": {1, 4000},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("rows: written, slowest ms (-want +got):\n%s", diff)
	}
	changes[1].Seq, changes[1].Service = 2, "soak/s-1"
	changes[1].Nodes = []nodeConvergence{{Node: "node-0", ToAck: sec(0.1), ToTraffic: sec(0.1)}, {Node: "node-1", ToAck: sec(4), ToTraffic: sec(3)}}
	top := slowest(changes, faults, 60*time.Second, 1)
	wantTop := []slowChange{{Seq: 2, Change: "add-service soak/s-1", At: sec(20), Node: "node-1", ToAck: sec(4), ToTraffic: sec(3),
		InProgress: []string{"agent/node-1"}}}
	if diff := cmp.Diff(wantTop, top); diff != "" {
		t.Errorf("slowest (-want +got):\n%s", diff)
	}
}

// TestSoakMarkdown: the tables render from a report with every part, and
// a broken invariant is listed.
func TestSoakMarkdown(t *testing.T) {
	r := &soakReport{Seed: 7, Duration: msDuration(10 * time.Minute), FaultsByKind: faultSummaries([]faultRecord{
		{Kind: kindControlPlane, Target: "controlplane/cp-1", Down: msDuration(3 * time.Second), Recovered: true,
			Recovery: msDuration(1500 * time.Millisecond), Failover: new(msDuration(800 * time.Millisecond)), Moved: 3},
	}), Traffic: trafficSummary{Rate: 100, Windows: []failureWindow{{Failures: 3, BySource: map[string]int{"node-1": 3}}}},
		Violations: []string{"agent/node-2 did not come back"}}
	md := r.markdown()
	for _, want := range []string{
		"| controlplane | 1 | 1 | 3.00 s / 3.00 s |",
		"failover (kill → every agent acked on the other replica, 1 kills that had agents): p50 800 ms",
		"| 0 ms | 0 ms | 3 | node-1 3 |",
		"- agent/node-2 did not come back",
	} {
		if !strings.Contains(md, want) {
			t.Errorf("markdown lacks %q:\n%s", want, md)
		}
	}
}
