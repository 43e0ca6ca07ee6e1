package system_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/switchyard-proxy/switchyard/e2e/system"
	switchyardv1 "github.com/switchyard-proxy/switchyard/proto/switchyard/v1"
)

// TestReplicasShareOneSettingsConfigMap runs two replicas started with
// different --mode (nftables, ipvs) that read one ConfigMap saying
// iptables: every agent programs iptables. Killing the replica the agents
// use, under a stream of connections, moves them to the other with
// nothing sent, no connection failed and no iptables packet counter gone
// back (nothing re-programmed); editing the ConfigMap then switches every
// agent to nftables, with no iptables rule left.
func TestReplicasShareOneSettingsConfigMap(t *testing.T) {
	c := startCluster(t, system.Config{Nodes: 2, Pods: 3, ControlPlanes: 2,
		ReplicaModes: []string{"nftables", "ipvs"}, Settings: "mode: iptables\n"})
	ctx := t.Context()
	e := &env{c: c}
	inMode := func(replica int, mode switchyardv1.DataplaneMode) {
		t.Helper()
		e.replica = replica
		for _, n := range c.Topo.Nodes() {
			waitFor(ctx, t, fmt.Sprintf("replica %d shows %s in %v", replica, n.Name, mode), func() (bool, string) {
				m, desc := e.agentMode(ctx, n.Name)
				return m == mode, desc
			})
		}
		e.settled(t, "settings")
	}
	inMode(0, switchyardv1.DataplaneMode_DATAPLANE_MODE_IPTABLES)
	var hashes [2]string
	for i := range hashes {
		s, err := c.SettingsAt(ctx, i)
		if err != nil {
			t.Fatal(err)
		}
		if s.GetSource() != "configmap" {
			t.Fatalf("replica %d settings %v, want them from the ConfigMap", i, s)
		}
		hashes[i] = s.GetHash()
	}
	if hashes[0] != hashes[1] {
		t.Fatalf("replicas' settings hashes %v differ", hashes)
	}
	nodes, err := e.nodes(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for name, st := range nodes {
		if st.GetSettingsHash() != hashes[0] {
			t.Errorf("%s programs settings %q, want %s", name, st.GetSettingsHash(), hashes[0])
		}
	}

	e.replica = 1
	node := c.Topo.Node(0)
	st := e.startStream(ctx)
	time.Sleep(faultAfter) // schedule of the fault, not a wait for a condition
	before, err := e.saveCounters(ctx, node)
	if err != nil {
		t.Fatal(err)
	}
	kill := time.Now()
	if err := c.KillControlPlane(0); err != nil {
		t.Fatal(err)
	}
	for _, n := range c.Topo.Nodes() {
		waitFor(ctx, t, n.Name+" on replica 1", func() (bool, string) {
			nodes, err := e.nodes(ctx)
			if err != nil {
				return false, err.Error()
			}
			s := nodes[n.Name]
			return reconnected(kill)(nil, s), fmt.Sprint(s)
		})
	}
	st.check(t, "settings-failover")
	after, err := e.saveCounters(ctx, node)
	if err != nil {
		t.Fatal(err)
	}
	keptCounters(t, "failover between replicas of one ConfigMap", before, after, keepAll)
	inMode(1, switchyardv1.DataplaneMode_DATAPLANE_MODE_IPTABLES)
	resumed, sent := resumeCounts(ctx, t, c, 1)
	m, err := c.ControlPlaneMetrics(ctx, 1)
	if err != nil {
		t.Fatal(err)
	}
	differ := m["switchyard_controlplane_agent_settings_differ_total"]
	t.Logf("failover: replica 1 (--mode ipvs) resumed=%v sent=%v agent_settings_differ_total=%v", resumed, sent, differ)
	if resumed == 0 || sent != 0 || differ != 0 {
		t.Errorf("failover: resumed=%v sent=%v differ=%v, want every resource resumed, none sent, no agent with other settings", resumed, sent, differ)
	}

	// One edit switches the fleet.
	edit := time.Now()
	if err := c.PutSettings(ctx, "mode: nftables\n"); err != nil {
		t.Fatal(err)
	}
	inMode(1, switchyardv1.DataplaneMode_DATAPLANE_MODE_NFTABLES)
	for _, n := range c.Topo.Nodes() {
		e.waitNoLeftovers(ctx, t, n, "iptables")
	}
	t.Logf("ConfigMap edit to nftables: every node switched, 0 iptables rules left, in %v", time.Since(edit).Round(time.Millisecond))
}
