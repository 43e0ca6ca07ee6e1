package nftables

import (
	"context"
	"fmt"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/switchyard-proxy/switchyard/dataplane"
	"github.com/switchyard-proxy/switchyard/dataplane/dataplanetest"
	"github.com/switchyard-proxy/switchyard/dataplane/maglev"
	"github.com/switchyard-proxy/switchyard/dataplane/nftables"
	"github.com/switchyard-proxy/switchyard/e2e/dataplane/dptest"
	"github.com/switchyard-proxy/switchyard/e2e/testbed/echo"
	"github.com/switchyard-proxy/switchyard/e2e/testbed/netns"
	"github.com/switchyard-proxy/switchyard/e2e/testbed/probe"
	switchyardv1 "github.com/switchyard-proxy/switchyard/proto/switchyard/v1"
)

// maglevClient is the address both nodes' connections leave from: the
// same client address and port through two nodes must reach one
// endpoint. It is added to each node's loopback; the node masquerades
// the connection (its source is off-cluster), so replies come back.
var maglevClient = netip.MustParseAddr("10.200.0.99")

// maglevNode is one node namespace with its own nftables Dataplane.
type maglevNode struct {
	node netns.Node
	dp   *nftables.Dataplane
}

// maglevView is the ClusterIP service 10.96.0.77:80 over pods, balanced
// by maglev with the table the control plane computes for them
// (maglev.New over address:targetPort, maglev.Size, maglev.Seed).
func maglevView(t *testing.T, pods []netns.Pod) (*switchyardv1.ServiceView, maglev.Table) {
	t.Helper()
	sv := dptest.Service("hashed", "10.96.0.77", 80, 0, pods...)
	sv.Type = switchyardv1.ServiceType_SERVICE_TYPE_CLUSTER_IP
	sv.LoadBalancing = switchyardv1.LoadBalancing_LOAD_BALANCING_MAGLEV
	var ids []string
	for _, p := range pods {
		ids = append(ids, netip.AddrPortFrom(p.IP, dptest.TargetPort).String())
	}
	mt, tab := dataplanetest.MaglevTable(t, "http", 0, ids...)
	sv.MaglevTables = []*switchyardv1.MaglevTable{mt}
	return sv, tab
}

// TestMaglevSameEndpointFromEveryNode programs one maglev service on two
// nodes and checks, with real TCP connections, that:
//   - each node's kernel map holds exactly the control plane's table
//     (read back with nft: slot i of the rule's block is endpoint
//     Slots[i]), for 10 endpoints and again after one is removed;
//   - 100 client tuples (one address, 100 ports) reach the endpoint the
//     table names, through either node: 100 of 100 agree;
//   - after removing one of the 10 endpoints, the same tuples again
//     reach what the new table names, and the tuples that moved are
//     those the tables say moved (the kernel's answer for a sample of
//     TestDisruption's simulation).
func TestMaglevSameEndpointFromEveryNode(t *testing.T) {
	topo := netns.New(t, netns.Spec{Nodes: 2, Pods: 10})
	if _, err := echo.StartPods(t.Context(), echo.Launcher{Topo: topo}, topo.Pods(),
		echo.Config{TCP: ":8080"}); err != nil {
		t.Fatalf("echo servers: %v", err)
	}
	podByName := map[string]netns.Pod{}
	for _, p := range topo.Pods() {
		podByName[p.Name] = p
	}
	var nodes []maglevNode
	for _, n := range topo.Nodes() {
		if _, err := topo.Exec(t.Context(), n.NS, "ip", "addr", "add", maglevClient.String()+"/32", "dev", "lo"); err != nil {
			t.Fatal(err)
		}
		dp, err := nftables.New(nftables.Config{Runner: dptest.NewRunner(topo, n.NS, runnerOptions),
			Families: []dataplane.Family{dataplane.IPv4}, Logger: netns.TestLogger(t)})
		if err != nil {
			t.Fatal(err)
		}
		nodes = append(nodes, maglevNode{node: n, dp: dp})
	}
	vip := netip.MustParseAddrPort("10.96.0.77:80")
	tuples := make([]uint16, 100)
	for i := range tuples {
		tuples[i] = uint16(41000 + i)
	}

	run := func(pods []netns.Pod) map[uint16]string {
		sv, tab := maglevView(t, pods)
		for _, n := range nodes {
			dptest.MustApply(t, n.dp, dptest.State(n.node, sv))
			checkKernelTable(t, topo, n.node, tab)
		}
		want := map[uint16]string{}
		for _, port := range tuples {
			want[port] = tab.Lookup(maglev.FlowKey(maglevClient, port), maglev.Seed)
			for _, n := range nodes {
				name := dialFrom(t, topo, n.node.NS, netip.AddrPortFrom(maglevClient, port), vip)
				got := netip.AddrPortFrom(podByName[name].IP, dptest.TargetPort).String()
				if got != want[port] {
					t.Errorf("%s from %s:%d: reached %s (%s), the table names %s", n.node.Name, maglevClient, port, got, name, want[port])
				}
			}
		}
		return want
	}
	pods := topo.Pods()
	before := run(pods)
	after := run(pods[1:])
	moved := 0
	for _, port := range tuples {
		if before[port] != after[port] {
			moved++
		}
	}
	t.Logf("removing %s: %d of %d tuples moved, each where the new table says, through both nodes", pods[0].IP, moved, len(tuples))
}

// dialFrom connects from ns, bound to src, to dst and returns the name
// of the pod that answered.
func dialFrom(t *testing.T, topo *netns.Topology, ns string, src, dst netip.AddrPort) string {
	t.Helper()
	res, err := probe.New(topo, ns).TCP(t.Context(), dst, probe.Options{Source: src, Timeout: 2 * time.Second})
	if err != nil || len(res.Failures) > 0 || len(res.Counts) != 1 {
		t.Fatalf("%s: %s -> %s: %v %v", ns, src, dst, res, err)
	}
	for name := range res.Counts {
		return name
	}
	return ""
}

// checkKernelTable reads the node's maglev table back from the kernel
// (dptest.ReadKernelMaglev) and compares it with tab: the same seed, and
// slot i held by the endpoint of the table's slot i, for every slot.
func checkKernelTable(t *testing.T, topo *netns.Topology, node netns.Node, tab maglev.Table) {
	t.Helper()
	exec := func(ctx context.Context, argv ...string) ([]byte, error) { return topo.Exec(ctx, node.NS, argv...) }
	km, err := dptest.ReadKernelMaglev(t.Context(), exec, "default/hashed/tcp/http")
	if err != nil {
		t.Fatalf("%s: %v", node.Name, err)
	}
	if km.Seed != maglev.Seed || len(km.Slots) != len(tab.Slots) {
		t.Fatalf("%s: rule hashes mod %d seed %#x, the table has %d slots and seed %#x", node.Name, len(km.Slots), km.Seed, len(tab.Slots), maglev.Seed)
	}
	var wrong []string
	for i, got := range km.Slots {
		if want := tab.Backend(uint32(i)); got != want {
			wrong = append(wrong, fmt.Sprintf("slot %d: %q, want %s", i, got, want))
		}
	}
	if len(wrong) > 0 {
		t.Fatalf("%s: the kernel's table differs from the control plane's (%d slots): %s", node.Name, len(wrong),
			strings.Join(wrong[:min(len(wrong), 10)], "; "))
	}
	t.Logf("%s: kernel map %s holds the control plane's %d slots over %d endpoints", node.Name, km.Map, len(km.Slots), len(tab.Backends))
}

// TestRoundRobinInTurn: a round-robin service's new connections take its
// endpoints in turn, "numgen inc" counting every connection the rule
// sees. Sequential connections from one client make the counts exact
// (100 each of 300 over 3 endpoints), far inside any ±4σ of a random
// draw; parallel ones (8 in flight) still come out exact, as each
// connection's first packet bumps the counter once.
func TestRoundRobinInTurn(t *testing.T) {
	b := newBed(t)
	sv := dptest.Service("in-turn", "10.96.0.78", 80, 0, b.Pods...)
	sv.Type = switchyardv1.ServiceType_SERVICE_TYPE_CLUSTER_IP
	sv.LoadBalancing = switchyardv1.LoadBalancing_LOAD_BALANCING_ROUND_ROBIN
	b.apply(t, dptest.State(b.Node, sv))
	dst := netip.MustParseAddrPort("10.96.0.78:80")
	for _, parallel := range []int{1, 8} {
		res, err := probe.New(b.Topo, b.Topo.Client().NS).TCP(t.Context(), dst, probe.Options{Count: 300, Parallel: parallel})
		if err != nil {
			t.Fatal(err)
		}
		if len(res.Failures) > 0 || len(res.Counts) != len(b.Pods) {
			t.Fatalf("%d in flight: %d failures, counts %v", parallel, len(res.Failures), res.Counts)
		}
		for name, c := range res.Counts {
			if c != 300/len(b.Pods) {
				t.Errorf("%d in flight: %s answered %d of 300, want exactly %d", parallel, name, c, 300/len(b.Pods))
			}
		}
		t.Logf("%d in flight: %v", parallel, res.Counts)
	}
}
