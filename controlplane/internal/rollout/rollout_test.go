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

// configMap is the settings ConfigMap as the drivers see it: the
// progress written, with a resourceVersion that a write needs unchanged.
type configMap struct {
	prog   Progress
	rv     int
	writes []Progress
}

func (c *configMap) WriteProgress(_ context.Context, p Progress, rv string) error {
	if rv != fmt.Sprint(c.rv) {
		return errors.New("conflict")
	}
	c.prog, c.writes = p, append(c.writes, p)
	c.rv++
	return nil
}

// replica is one control-plane replica: its driver and the agents
// connected to it.
type replica struct {
	d       *Driver
	reports map[string]NodeReport
}

type bed struct {
	t        *testing.T
	clk      *clocktesting.FakeClock
	cm       *configMap
	base     nodeview.Defaults
	spec     *Spec
	ns       map[string]*model.Node
	replicas []*replica
}

func newBed(t *testing.T, sp *Spec, nodes int, replicas ...string) *bed {
	b := &bed{t: t, clk: clocktesting.NewFakeClock(time.Unix(1000, 0)), cm: &configMap{},
		base: nodeview.Defaults{Mode: iptables}, spec: sp, ns: nodes4(nodes)}
	for _, id := range replicas {
		r := &replica{reports: map[string]NodeReport{}}
		r.d = NewDriver(DriverConfig{Replica: id, Writer: b.cm, Clock: b.clk,
			Fleet: func() map[string]NodeReport { return r.reports }})
		b.replicas = append(b.replicas, r)
	}
	return b
}

func nodes4(n int) map[string]*model.Node { return nodes(n, nil) }

func (b *bed) plan() Plan {
	return NewPlan(b.base, b.spec, b.cm.prog, fmt.Sprint(b.cm.rv), b.ns, parseMode)
}

// tick lets every replica see the ConfigMap and look at its fleet once.
func (b *bed) tick() {
	for _, r := range b.replicas {
		r.d.SetPlan(b.plan())
		r.d.Tick(b.t.Context())
	}
}

// ticks ticks n times, the clock stepping every after each tick.
func (b *bed) ticks(n int, every time.Duration) {
	for range n {
		b.tick()
		b.clk.Step(every)
	}
}

// serve connects node to replica i, programming settings hash h.
func (b *bed) serve(i int, node, h string) {
	b.replicas[i].reports[node] = NodeReport{Connected: true, SettingsHash: h}
}

// TestDriver walks a rollout on one replica: the canary step waits for
// its node to program the target (the replica records itself waiting),
// pauses, advances; a NACK since the step began halts it and the halt
// stays; a new name starts over; a failing datapath halts it.
func TestDriver(t *testing.T) {
	b := newBed(t, spec("node-00"), 4, "cp-a")
	p := b.plan()
	target, old := p.TargetHash(), p.SettingsHash("node-01")
	b.serve(0, "node-00", old)
	b.tick()
	if st := b.replicas[0].d.Status(); st.State != "progressing" || st.Nodes[0].State != "pending" {
		t.Fatalf("before the canary applied: %v", st)
	}
	if _, ok := b.cm.prog.Waiting["cp-a"]; !ok || b.cm.prog.Step != 0 {
		t.Fatalf("the replica did not record itself waiting: %v", b.cm.prog)
	}
	b.serve(0, "node-00", target)
	b.tick() // done waiting: the entry goes
	if len(b.cm.prog.Waiting) != 0 {
		t.Fatalf("still waiting after the canary applied: %v", b.cm.prog)
	}
	b.tick()
	b.clk.Step(5 * time.Second)
	b.tick()
	if st := b.replicas[0].d.Status(); st.State != "pausing" || st.AppliedNodes != 1 || b.cm.prog.Step != 0 {
		t.Fatalf("canary applied, within the pause: %v, progress %v", st, b.cm.prog)
	}
	b.clk.Step(5 * time.Second)
	b.tick()
	if b.cm.prog.Step != 1 {
		t.Fatalf("after the pause: progress %v, want step 1", b.cm.prog)
	}

	// Step 1 reaches one more node, which NACKs after the step began.
	var second string
	step1 := b.plan()
	for _, n := range step1.Reached() {
		if n != "node-00" {
			second = n
		}
	}
	b.serve(0, second, old)
	b.tick()
	b.clk.Step(time.Second)
	b.replicas[0].reports[second] = NodeReport{Connected: true, SettingsHash: old, LastNack: b.clk.Now(), NackMessage: "nft: no such file"}
	b.tick()
	if st := b.replicas[0].d.Status(); st.State != "halted" || b.cm.prog.Halted == "" || b.cm.prog.Step != 1 {
		t.Fatalf("after a NACK: %v, progress %v", st, b.cm.prog)
	}
	writes := len(b.cm.writes)
	b.clk.Step(time.Minute)
	b.tick()
	kept := b.plan()
	if st := b.replicas[0].d.Status(); st.State != "halted" || len(b.cm.writes) != writes || len(kept.Reached()) != 2 {
		t.Fatalf("halted stays halted, reached kept: %v, writes %d→%d", st, writes, len(b.cm.writes))
	}

	// A new name starts over; the canary applies, then its datapath fails.
	b.spec = spec("node-00")
	b.spec.Name = "again"
	b.replicas[0].reports = map[string]NodeReport{"node-00": {Connected: true, SettingsHash: target}}
	b.tick()
	b.clk.Step(time.Second)
	b.replicas[0].reports["node-00"] = NodeReport{Connected: true, SettingsHash: target,
		Datapath: &switchyardv1.DatapathStatus{Healthy: false, LastProbe: timestamppb.New(b.clk.Now()), Error: "timeout"}}
	b.tick()
	if b.cm.prog.Name != "again" || b.cm.prog.Halted == "" {
		t.Fatalf("failing datapath did not halt: progress %v, status %v", b.cm.prog, b.replicas[0].d.Status())
	}
	if st := b.replicas[0].d.Status(); st.AppliedNodes != 0 || st.Nodes[0].State != "unhealthy" {
		t.Errorf("after the halt the failing node shows %v", st.Nodes)
	}
}

// TestDriverReplicasGateEachOther: two replicas. The one that serves
// none of the canaries never moves the canary step on by itself; when
// both serve canaries, the one whose canary has not applied holds the
// other back until it has; a replica gone (its waiting entry stale)
// holds nobody.
func TestDriverReplicasGateEachOther(t *testing.T) {
	b := newBed(t, spec("node-00"), 3, "cp-a", "cp-b")
	p := b.plan()
	target, old := p.TargetHash(), p.SettingsHash("node-01")
	b.serve(0, "node-00", old)
	b.serve(1, "node-01", old)
	b.ticks(3, 10*time.Second)
	if b.cm.prog.Step != 0 {
		t.Fatalf("the canary step moved on before the canary applied: %v", b.cm.prog)
	}

	sp := spec("node-00", "node-01")
	sp.Name = "two-canaries"
	b.spec = sp
	b.serve(0, "node-00", target)
	b.ticks(4, 5*time.Second)
	if b.cm.prog.Step != 0 {
		t.Fatalf("cp-a moved on while cp-b's canary had not applied: %v", b.cm.prog)
	}
	if _, ok := b.cm.prog.Waiting["cp-b"]; !ok {
		t.Fatalf("cp-b does not wait for node-01: %v", b.cm.prog)
	}
	if st := b.replicas[0].d.Status(); st.State != "progressing" || !slices.Contains(st.WaitingReplicas, "cp-b") {
		t.Errorf("cp-a while cp-b waits: %v", st)
	}
	b.serve(1, "node-01", target)
	b.ticks(4, 5*time.Second) // cp-b's entry goes, then a whole pause
	if b.cm.prog.Step != 1 || len(b.cm.prog.Waiting) != 0 {
		t.Errorf("after node-01 applied and the pause: progress %v", b.cm.prog)
	}

	// A stale entry (a replica gone) holds nobody.
	prog := Progress{Name: "x", Waiting: map[string]time.Time{"cp-gone": b.clk.Now().Add(-time.Minute)}}
	if others := prog.waitingOthers("cp-a", b.clk.Now()); len(others) != 0 {
		t.Errorf("stale waiting entry counted: %v", others)
	}
}
