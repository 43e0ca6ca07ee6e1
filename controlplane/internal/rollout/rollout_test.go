package rollout

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/switchyard-proxy/switchyard/controlplane/internal/model"
	"github.com/switchyard-proxy/switchyard/controlplane/internal/nodeview"
	switchyardv1 "github.com/switchyard-proxy/switchyard/proto/switchyard/v1"
)

const (
	iptables = switchyardv1.DataplaneMode_DATAPLANE_MODE_IPTABLES
	nftables = switchyardv1.DataplaneMode_DATAPLANE_MODE_NFTABLES
	ipvs     = switchyardv1.DataplaneMode_DATAPLANE_MODE_IPVS
)

func parseMode(s string) (switchyardv1.DataplaneMode, error) {
	switch s {
	case "iptables":
		return iptables, nil
	case "nftables":
		return nftables, nil
	case "ipvs":
		return ipvs, nil
	}
	return 0, errors.New("no such mode")
}

func nodes(n int, labels map[string]map[string]string) map[string]*model.Node {
	out := map[string]*model.Node{}
	for i := range n {
		name := fmt.Sprintf("node-%02d", i)
		out[name] = &model.Node{Name: name, Labels: labels[name]}
	}
	return out
}

func spec(canary ...string) *Spec {
	return &Spec{Name: "to-nft", Target: nodeview.Defaults{Mode: nftables}, CanaryNodes: canary,
		Percents: []float64{10, 50, 100}, Pause: 10 * time.Second}
}

func TestParseSteps(t *testing.T) {
	for _, tc := range []struct {
		in   []string
		want []float64
		err  bool
	}{
		{nil, []float64{100}, false},
		{[]string{"10%", "50%"}, []float64{10, 50, 100}, false},
		{[]string{"2.5%", "100%"}, []float64{2.5, 100}, false},
		{[]string{"50%", "10%"}, nil, true},
		{[]string{"10"}, nil, true},
		{[]string{"0%"}, nil, true},
		{[]string{"150%"}, nil, true},
	} {
		got, err := ParseSteps(tc.in)
		if (err != nil) != tc.err || !slices.Equal(got, tc.want) {
			t.Errorf("ParseSteps(%q) = %v, %v; want %v, error %t", tc.in, got, err, tc.want, tc.err)
		}
	}
}

// TestPlanSteps: canaries first (named and labelled), then growing
// shares, each step holding the one before, the same on every call; a
// Progress of another rollout is no progress; a mode label wins.
func TestPlanSteps(t *testing.T) {
	ns := nodes(20, map[string]map[string]string{
		"node-07": {CanaryLabel: "true"},
		"node-11": {ModeLabel: "ipvs"},
		"node-12": {ModeLabel: "bogus"},
	})
	base := nodeview.Defaults{Mode: iptables}
	p := NewPlan(base, spec("node-03", "gone"), Progress{}, "1", ns, parseMode)
	var names []string
	var sizes []int
	for i, s := range p.Steps {
		names, sizes = append(names, s.Name), append(sizes, len(s.Nodes))
		if i > 0 {
			for _, n := range p.Steps[i-1].Nodes {
				if !slices.Contains(s.Nodes, n) {
					t.Errorf("step %s lost %s of step %s", s.Name, n, p.Steps[i-1].Name)
				}
			}
		}
	}
	if !slices.Equal(names, []string{"canary", "10%", "50%", "100%"}) {
		t.Errorf("steps %v", names)
	}
	if sizes[0] != 2 || sizes[3] != 20 || sizes[1] < 2 || sizes[1] > 4 || sizes[2] < 10 || sizes[2] > 12 {
		t.Errorf("step sizes %v, want 2 canaries, 2+ceil(10%%), 2+ceil(50%%) at most, all 20", sizes)
	}
	if !slices.Equal(p.Reached(), []string{"node-03", "node-07"}) {
		t.Errorf("reached at step 0: %v", p.Reached())
	}
	if got := p.Settings.PerNode["node-03"].Mode; got != nftables {
		t.Errorf("canary mode %v", got)
	}
	if _, ok := p.Settings.PerNode["node-05"]; ok {
		t.Error("a node not reached has settings of its own")
	}
	if got := p.Settings.PerNode["node-11"].Mode; got != ipvs || p.Source["node-11"] != "label" {
		t.Errorf("labelled node: mode %v source %q", got, p.Source["node-11"])
	}
	if _, ok := p.Settings.PerNode["node-12"]; ok {
		t.Error("a label naming no mode was taken")
	}
	if p.SettingsHash("node-03") != p.TargetHash() || p.SettingsHash("node-05") != nodeview.SettingsHash(base) {
		t.Error("SettingsHash does not follow the plan")
	}
	again := NewPlan(base, spec("node-03", "gone"), Progress{Name: "other", Step: 3}, "1", ns, parseMode)
	if !slices.Equal(again.Steps[2].Nodes, p.Steps[2].Nodes) || again.Progress.Step != 0 {
		t.Errorf("not deterministic, or another rollout's progress taken: %v", again.Progress)
	}
	last := NewPlan(base, spec(), Progress{Name: "to-nft", Step: 9}, "1", nodes(20, nil), parseMode)
	if len(last.Reached()) != 20 || last.Steps[0].Name != "10%" {
		t.Errorf("without canaries, past the end: steps %v reached %d", last.Steps[0].Name, len(last.Reached()))
	}
}

type writes struct {
	got []Progress
	rv  []string
	err error
}

func (w *writes) WriteProgress(_ context.Context, p Progress, rv string) error {
	if w.err != nil {
		return w.err
	}
	w.got, w.rv = append(w.got, p), append(w.rv, rv)
	return nil
}

// TestDriver walks a rollout: the canary step waits for its node to
// program the target, pauses, advances; a NACK since the step began
// halts it; a failing datapath on a node that applied halts it; nodes
// this replica does not serve do not block.
func TestDriver(t *testing.T) {
	ns := nodes(4, nil)
	base := nodeview.Defaults{Mode: iptables}
	sp := spec("node-00")
	clk := clocktesting.NewFakeClock(time.Unix(1000, 0))
	reports := map[string]NodeReport{}
	w := &writes{}
	d := NewDriver(DriverConfig{Fleet: func() map[string]NodeReport { return reports }, Writer: w, Clock: clk})
	plan := NewPlan(base, sp, Progress{Name: "to-nft"}, "7", ns, parseMode)
	d.SetPlan(plan)
	target, old := plan.TargetHash(), plan.SettingsHash("node-01")

	reports["node-00"] = NodeReport{Connected: true, SettingsHash: old}
	d.Tick(t.Context())
	if st := d.Status(); st.State != "progressing" || st.Nodes[0].State != "pending" || len(w.got) != 0 {
		t.Fatalf("before the canary applied: %v, writes %v", st, w.got)
	}
	reports["node-00"] = NodeReport{Connected: true, SettingsHash: target}
	d.Tick(t.Context())
	clk.Step(5 * time.Second)
	d.Tick(t.Context())
	if st := d.Status(); st.State != "pausing" || st.AppliedNodes != 1 || len(w.got) != 0 {
		t.Fatalf("canary applied, within the pause: %v, writes %v", st, w.got)
	}
	clk.Step(5 * time.Second)
	d.Tick(t.Context())
	if len(w.got) != 1 || w.got[0] != (Progress{Name: "to-nft", Step: 1}) || w.rv[0] != "7" {
		t.Fatalf("after the pause: writes %v at %v, want step 1 at resourceVersion 7", w.got, w.rv)
	}

	// The watch sees the annotation: step 1 (10% of 4 = 1 node beside the
	// canary). Its node NACKs after the step began: halted.
	plan = NewPlan(base, sp, w.got[0], "8", ns, parseMode)
	d.SetPlan(plan)
	var second string
	for _, n := range plan.Reached() {
		if n != "node-00" {
			second = n
		}
	}
	reports[second] = NodeReport{Connected: true, SettingsHash: old}
	d.Tick(t.Context())
	clk.Step(time.Second)
	reports[second] = NodeReport{Connected: true, SettingsHash: old, LastNack: clk.Now(), NackMessage: "nft: no such file"}
	d.Tick(t.Context())
	st := d.Status()
	if st.State != "halted" || len(w.got) != 2 || w.got[1].Halted == "" || w.got[1].Step != 1 {
		t.Fatalf("after a NACK: %v, writes %v", st, w.got)
	}
	plan = NewPlan(base, sp, w.got[1], "9", ns, parseMode)
	d.SetPlan(plan)
	d.Tick(t.Context())
	if st := d.Status(); st.State != "halted" || len(w.got) != 2 || len(plan.Reached()) != 2 {
		t.Fatalf("halted stays halted, reached kept: %v, writes %d, reached %v", st, len(w.got), plan.Reached())
	}

	// A new rollout name starts over; the canary applies, but its datapath
	// fails after the step began: halted. A node served elsewhere does not
	// block.
	sp2 := spec("node-00", "node-01")
	sp2.Name = "again"
	d.SetPlan(NewPlan(base, sp2, w.got[1], "10", ns, parseMode))
	reports = map[string]NodeReport{"node-00": {Connected: true, SettingsHash: target}}
	d.Tick(t.Context())
	clk.Step(10 * time.Second)
	d.Tick(t.Context())
	if len(w.got) != 3 || w.got[2] != (Progress{Name: "again", Step: 1}) {
		t.Fatalf("node-01 served elsewhere blocked the step: writes %v, status %v", w.got, d.Status())
	}
	d.SetPlan(NewPlan(base, sp2, w.got[2], "11", ns, parseMode))
	d.Tick(t.Context())
	clk.Step(time.Second)
	reports["node-00"] = NodeReport{Connected: true, SettingsHash: target,
		Datapath: &switchyardv1.DatapathStatus{Healthy: false, LastProbe: timestamppb.New(clk.Now()), Error: "timeout"}}
	d.Tick(t.Context())
	if len(w.got) != 4 || w.got[3].Halted == "" {
		t.Fatalf("failing datapath did not halt: writes %v, status %v", w.got, d.Status())
	}
}
