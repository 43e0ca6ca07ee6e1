package system_test

import (
	"context"
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/switchyard-proxy/switchyard/e2e/system"
	switchyardv1 "github.com/switchyard-proxy/switchyard/proto/switchyard/v1"
)

// TestRollout rolls a mode change out to three nodes a step at a time,
// under a stream of connections through the canary (node-0): iptables to
// nftables on node-0 alone first, then half the nodes, then all, each
// step only once the nodes before it acknowledged the new settings and
// stayed healthy through the pause; no connection fails. A second
// rollout halts at its canary step when node-0's datapath probe fails (a
// foreign DROP in front of its rules): the nodes not reached keep their
// settings, and GetRollout says why.
func TestRollout(t *testing.T) {
	c := startCluster(t, system.Config{Nodes: 3, Pods: 3, Settings: "mode: iptables\n"})
	e := &env{c: c}
	ctx := t.Context()
	vip := netip.MustParseAddrPort(system.DatapathCanary)
	reserveCanary(t, e, vip)
	names := make([]string, 0, 3)
	for _, n := range c.Topo.Nodes() {
		names = append(names, n.Name)
	}
	canary := names[0]
	e.settled(t, "before the rollout")
	rollout := func() *switchyardv1.GetRolloutResponse {
		r, err := c.RolloutAt(ctx, 0)
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	modeOf := func() map[string]switchyardv1.DataplaneMode {
		nodes, err := e.nodes(ctx)
		if err != nil {
			t.Fatal(err)
		}
		out := map[string]switchyardv1.DataplaneMode{}
		for name, st := range nodes {
			out[name] = st.GetAgent().GetMode()
		}
		return out
	}

	st := e.startStreamAt(ctx, 20, 30*time.Second)
	start := time.Now()
	if err := c.PutSettings(ctx, `mode: iptables
rollout:
  name: to-nftables
  settings: {mode: nftables}
  canaryNodes: [`+canary+`]
  steps: ["50%"]
  pause: 3s
`); err != nil {
		t.Fatal(err)
	}
	// Each step is seen reaching its nodes while the others keep
	// iptables: the canary alone, then two, then three.
	var seen []string
	waitFor(ctx, t, "the rollout completes", func() (bool, string) {
		r := rollout()
		modes := modeOf()
		nft := 0
		for _, n := range names {
			if modes[n] == switchyardv1.DataplaneMode_DATAPLANE_MODE_NFTABLES {
				nft++
			}
		}
		if r.GetState() == "halted" {
			t.Fatalf("rollout halted: %s", r.GetSummary())
		}
		if modes[canary] != switchyardv1.DataplaneMode_DATAPLANE_MODE_NFTABLES && nft > 0 {
			t.Fatalf("a node switched before the canary: %v", modes)
		}
		if r.GetName() != "to-nftables" {
			return false, r.GetSummary() // the replica has not looked since the ConfigMap changed
		}
		step := fmt.Sprintf("%d/%d nodes nftables at step %d", nft, len(names), r.GetStep())
		if len(seen) == 0 || seen[len(seen)-1] != step {
			seen = append(seen, step)
			t.Logf("%v: %s (%s)", time.Since(start).Round(100*time.Millisecond), step, r.GetSummary())
		}
		return r.GetState() == "complete" && nft == len(names), r.GetSummary()
	})
	took := time.Since(start)
	for _, want := range []string{"1/3 nodes nftables at step 0", "2/3 nodes nftables at step 1", "3/3 nodes nftables at step 2"} {
		if !slices.Contains(seen, want) {
			t.Errorf("the rollout never showed %q: %v", want, seen)
		}
	}
	t.Logf("rollout iptables→nftables over 3 nodes (canary, 50%%, 100%%, pause 3s): complete after %v", took.Round(100*time.Millisecond))
	st.check(t, "rollout")

	// A second rollout: node-0's datapath fails during its canary step.
	before, err := e.nodes(ctx)
	if err != nil {
		t.Fatal(err)
	}
	oldHash := before[names[1]].GetSettingsHash()
	if err := c.PutSettings(ctx, `mode: nftables
rollout:
  name: slower-resync
  settings: {syncPeriod: 30m}
  canaryNodes: [`+canary+`]
  pause: 30s
`); err != nil {
		t.Fatal(err)
	}
	waitFor(ctx, t, "the canary applies the second rollout", func() (bool, string) {
		r := rollout()
		return r.GetName() == "slower-resync" && r.GetAppliedNodes() == 1, r.GetSummary()
	})
	drop := [][]string{{"nft", "add", "table", "ip", "foreign-canary"},
		{"nft", "add", "chain", "ip", "foreign-canary", "out", "{", "type", "filter", "hook", "output", "priority", "raw", ";", "}"},
		{"nft", "add", "rule", "ip", "foreign-canary", "out", "ip", "daddr", vip.Addr().String(), "drop"}}
	e.run(ctx, t, c.Topo.Node(0), drop)
	broke := time.Now()
	t.Cleanup(func() {
		e.run(context.Background(), t, c.Topo.Node(0), [][]string{{"nft", "delete", "table", "ip", "foreign-canary"}})
	})
	var halted *switchyardv1.GetRolloutResponse
	waitFor(ctx, t, "the rollout halts", func() (bool, string) {
		halted = rollout()
		return halted.GetState() == "halted", halted.GetSummary()
	})
	t.Logf("halted %v after the foreign DROP on the canary: %s", time.Since(broke).Round(100*time.Millisecond), halted.GetSummary())
	if !strings.Contains(halted.GetHaltReason(), canary) || !strings.Contains(halted.GetHaltReason(), "datapath") {
		t.Errorf("halt reason %q, want the canary's datapath", halted.GetHaltReason())
	}
	time.Sleep(4 * time.Second) // a halted rollout must not move on: look again after more than a pause
	after, err := e.nodes(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range names[1:] {
		if h := after[n].GetSettingsHash(); h != oldHash || after[n].GetSettingsSource() != "cluster" {
			t.Errorf("%s, not reached, programs settings %s (%s), want the cluster's %s", n, h, after[n].GetSettingsSource(), oldHash)
		}
	}
	if r := rollout(); r.GetState() != "halted" || r.GetStep() != 0 {
		t.Errorf("after the halt: %s", r.GetSummary())
	}
}
