package nftables

import (
	"fmt"
	"github.com/switchyard-proxy/switchyard/e2e/dataplane/dptest"
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/switchyard-proxy/switchyard/dataplane"
	"github.com/switchyard-proxy/switchyard/dataplane/nftables"
	"github.com/switchyard-proxy/switchyard/e2e/testbed/probe"
	switchyardv1 "github.com/switchyard-proxy/switchyard/proto/switchyard/v1"
	"google.golang.org/protobuf/proto"
)

func TestClusterIPAndNodePort(t *testing.T) {
	b := newBed(t)
	b.apply(t, dptest.State(b.node, dptest.Service("web", vip.Addr().String(), 80, 30080, b.pods...)))
	for _, tc := range []struct {
		name, ns string
		dst      netip.AddrPort
	}{
		{"cluster IP from node (output hook)", b.node.NS, vip},
		{"cluster IP from client (prerouting hook)", b.topo.Client().NS, vip},
		{"node port from client", b.topo.Client().NS, netip.AddrPortFrom(b.node.IP, 30080)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res, err := probe.New(b.topo, tc.ns).TCP(t.Context(), tc.dst, probe.Options{Count: 300, Parallel: 8})
			if err != nil {
				t.Fatal(err)
			}
			dptest.CheckShares(t, res, 3)
		})
	}
}

func TestAffinityPinsClient(t *testing.T) {
	b := newBed(t)
	sv := dptest.Service("sticky", vip.Addr().String(), 80, 0, b.pods...)
	sv.Type = switchyardv1.ServiceType_SERVICE_TYPE_CLUSTER_IP
	sv.SessionAffinity = switchyardv1.SessionAffinity_SESSION_AFFINITY_CLIENT_IP
	sv.SessionAffinityTimeoutSeconds = 600
	b.apply(t, dptest.State(b.node, sv))
	res, err := probe.New(b.topo, b.topo.Client().NS).TCP(t.Context(), vip, probe.Options{Count: 50})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Failures) > 0 || len(res.Counts) != 1 {
		t.Fatalf("want all 50 on one backend, got %v, failures %v", res.Counts, res.Failures)
	}
}

func TestNoEndpointsRefusedFast(t *testing.T) {
	b := newBed(t)
	b.apply(t, dptest.State(b.node, dptest.Service("empty", vip.Addr().String(), 80, 30082)))
	for _, tc := range []struct {
		name, ns string
		dst      netip.AddrPort
	}{
		{"cluster IP from node", b.node.NS, vip},
		{"cluster IP from client", b.topo.Client().NS, vip},
		{"node port from client", b.topo.Client().NS, netip.AddrPortFrom(b.node.IP, 30082)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res, err := probe.New(b.topo, tc.ns).TCP(t.Context(), tc.dst, probe.Options{Count: 5, Timeout: 2 * time.Second})
			if err != nil {
				t.Fatal(err)
			}
			if len(res.Failures) != 5 {
				t.Fatalf("want 5 failures, got %v", res)
			}
			for _, f := range res.Failures {
				if f.Reason != probe.ReasonRefused {
					t.Errorf("attempt %d: %s, want refused", f.Attempt, f.Reason)
				}
			}
			if res.Elapsed > time.Second {
				t.Errorf("5 refusals took %v: not fast", res.Elapsed)
			}
		})
	}
}

func TestETPLocalDropsWithoutLocalEndpoints(t *testing.T) {
	b := newBed(t)
	sv := dptest.Service("local", vip.Addr().String(), 80, 30081, b.pods...)
	sv.ExternalTrafficPolicy = switchyardv1.TrafficPolicy_TRAFFIC_POLICY_LOCAL
	b.apply(t, dptest.State(b.node, sv)) // endpoints exist, none local: DROP
	np := netip.AddrPortFrom(b.node.IP, 30081)
	res, err := probe.New(b.topo, b.topo.Client().NS).TCP(t.Context(), np, probe.Options{Count: 3, Parallel: 3})
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range res.Failures {
		if f.Reason != probe.ReasonTimeout {
			t.Errorf("attempt %d: %s, want timeout (dropped)", f.Attempt, f.Reason)
		}
	}
	if len(res.Failures) != 3 {
		t.Errorf("want 3 dropped attempts, got %v", res.Counts)
	}
	// The cluster IP still uses cluster endpoints.
	res, err = probe.New(b.topo, b.node.NS).TCP(t.Context(), vip, probe.Options{Count: 10})
	if err != nil || len(res.Failures) > 0 {
		t.Fatalf("cluster IP under ETP Local: %v %v", err, res.Failures)
	}
	// With a local endpoint the node port answers, from that one only.
	// (A new message: Apply may keep what it was given, see State.)
	sv = proto.Clone(sv).(*switchyardv1.ServiceView)
	sv.LocalEndpoints = sv.ClusterEndpoints[:1]
	sv.LocalEndpoints[0].IsLocal = true
	b.apply(t, dptest.State(b.node, sv))
	res, err = probe.New(b.topo, b.topo.Client().NS).TCP(t.Context(), np, probe.Options{Count: 10})
	if err != nil || len(res.Failures) > 0 || len(res.Counts) != 1 {
		t.Fatalf("node port with a local endpoint: %v %v %v", err, res.Counts, res.Failures)
	}
}

func TestPartialSyncTouchesOnlyChangedObjects(t *testing.T) {
	b := newBed(t)
	var svcs []*switchyardv1.ServiceView
	for i := range 50 {
		svcs = append(svcs, dptest.Service(fmt.Sprintf("s%d", i), fmt.Sprintf("10.96.1.%d", i+1), 80, 0, b.pods...))
	}
	b.apply(t, dptest.State(b.node, svcs...))
	before := blocksOf(b.listTable(t))
	b.runner.take()

	svcs[7] = dptest.Service("s7", "10.96.1.8", 80, 0, b.pods[0], b.pods[1]) // one endpoint gone
	b.apply(t, dptest.State(b.node, svcs...))
	txs := b.runner.take()
	if len(txs) != 1 {
		t.Fatalf("want one transaction, got %d", len(txs))
	}
	for _, l := range strings.Split(strings.TrimSpace(txs[0]), "\n") {
		if !strings.Contains(l, "endpoints-tcp") {
			t.Errorf("transaction touches another object: %s", l)
		}
		if !strings.HasPrefix(l, "add element ") && !strings.HasPrefix(l, "delete element ") {
			t.Errorf("an endpoint change must be map elements only, got: %s", l)
		}
	}
	t.Logf("transaction:\n%s", txs[0])
	// The kernel agrees: no chain changed (so the commit validated no
	// chain), only the endpoint map. The removed pod still serves the
	// other 49 services, so its hairpin pair stays.
	after := blocksOf(b.listTable(t))
	var changed []string
	for n, body := range before {
		if a, ok := after[n]; !ok || a != body {
			changed = append(changed, n)
		}
	}
	for n := range after {
		if _, ok := before[n]; !ok {
			changed = append(changed, n)
		}
	}
	slices.Sort(changed)
	if len(changed) != 1 || !strings.HasPrefix(changed[0], "map endpoints-tcp-") {
		t.Errorf("kernel shows changed %v, want only one TCP endpoint map", changed)
	}
	res, err := probe.New(b.topo, b.node.NS).TCP(t.Context(), netip.MustParseAddrPort("10.96.1.8:80"), probe.Options{Count: 20})
	if err != nil || len(res.Failures) > 0 || len(res.Counts) != 2 {
		t.Fatalf("after partial sync: %v %v %v", err, res.Counts, res.Failures)
	}
}

func TestSecondApplyIsNoopFullResyncAndCleanup(t *testing.T) {
	b := newBed(t)
	foreign := "add table ip foreign\nadd chain ip foreign c\nadd rule ip foreign c tcp dport 9 return\n"
	if _, err := b.runner.Run(t.Context(), []string{"nft", "-f", "-"}, []byte(foreign)); err != nil {
		t.Fatal(err)
	}
	web := dptest.Service("web", "10.96.0.10", 80, 30080, b.pods...)
	sticky := dptest.Service("sticky", "10.96.0.11", 80, 0, b.pods...)
	sticky.SessionAffinity = switchyardv1.SessionAffinity_SESSION_AFFINITY_CLIENT_IP
	sticky.SessionAffinityTimeoutSeconds = 60
	lb := dptest.Service("lb", "10.96.0.12", 443, 30443, b.pods[0])
	lb.Type = switchyardv1.ServiceType_SERVICE_TYPE_LOAD_BALANCER
	lb.LoadBalancerIps = []string{"203.0.113.9"}
	lb.LoadBalancerSourceRanges = []string{"198.51.100.0/24"}
	lb.ExternalIps = []string{"192.0.2.9"}
	lb.ExternalTrafficPolicy = switchyardv1.TrafficPolicy_TRAFFIC_POLICY_LOCAL
	lb.LocalEndpoints = lb.ClusterEndpoints
	dns := dptest.Service("dns", "10.96.0.13", 53, 0, b.pods...)
	dns.Ports[0].Protocol = switchyardv1.Protocol_PROTOCOL_UDP
	st := dptest.State(b.node, web, sticky, lb, dns, dptest.Service("empty", "10.96.0.14", 80, 30081))
	b.apply(t, st)
	b.runner.take()
	b.apply(t, st)
	if txs := b.runner.take(); len(txs) != 0 {
		t.Errorf("second Apply of the same state ran %d transactions", len(txs))
	}
	listed := b.listTable(t)
	if err := b.dp.Apply(t.Context(), st, dataplane.ApplyOptions{Full: true}); err != nil {
		t.Fatalf("full resync: %v", err)
	}
	if again := b.listTable(t); again != listed {
		t.Errorf("full resync of an unchanged state changed the table:\nbefore:\n%s\nafter:\n%s", listed, again)
	}
	// A restarted agent reconciles (lists, rewrites, deletes leftovers).
	restarted := b.newDP(t, nftables.Config{})
	if err := restarted.Apply(t.Context(), dptest.State(b.node, web), dataplane.ApplyOptions{}); err != nil {
		t.Fatalf("first Apply after restart: %v", err)
	}
	if got := b.listTable(t); strings.Contains(got, "default/sticky/") || strings.Contains(got, "default/lb/") {
		t.Errorf("leftovers after restart:\n%s", got)
	}
	if err := restarted.Cleanup(t.Context()); err != nil {
		t.Fatal(err)
	}
	out, err := b.topo.Exec(t.Context(), b.node.NS, "nft", "list", "tables")
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(out), "switchyard") || !strings.Contains(string(out), "table ip foreign") {
		t.Errorf("after Cleanup: %s", out)
	}
	// Traffic no longer reaches the service.
	res, err := probe.New(b.topo, b.node.NS).TCP(t.Context(), vip, probe.Options{Count: 1})
	if err != nil || res.Succeeded() != 0 {
		t.Errorf("service still answers after Cleanup: %v %v", err, res)
	}
}

// TestRunnerStaysInNodeNamespace guards the fork-from-a-thread runner:
// the table must appear in the node namespace and nowhere else we can see.
func TestRunnerStaysInNodeNamespace(t *testing.T) {
	b := newBed(t)
	b.apply(t, dptest.State(b.node, dptest.Service("web", vip.Addr().String(), 80, 0, b.pods...)))
	for _, ns := range []string{b.topo.Client().NS, b.pods[0].NS} {
		out, err := b.topo.Exec(t.Context(), ns, "nft", "list", "tables")
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(string(out), "switchyard") {
			t.Errorf("table leaked into %s", ns)
		}
	}
	if !strings.Contains(b.listTable(t), "chain services") {
		t.Error("table not in the node namespace")
	}
}

// TestHairpinThroughTheVIP: a pod whose Service sends it back to itself
// gets its own reply, masqueraded to the node (the hairpin-endpoints set
// in postrouting; without it the reply would go pod-to-pod and be
// dropped as not matching the connection).
func TestHairpinThroughTheVIP(t *testing.T) {
	b := newBed(t)
	self := b.pods[0]
	b.apply(t, dptest.State(b.node, dptest.Service("self", vip.Addr().String(), 80, 0, self)))
	res, err := probe.New(b.topo, self.NS).TCP(t.Context(), vip, probe.Options{Count: 10})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Failures) > 0 || res.Counts[self.Name] != 10 {
		t.Fatalf("hairpin: want 10 replies from %s, got %s", self.Name, res)
	}
	for c := range res.Clients {
		if c == self.IP.String() {
			t.Errorf("%s saw its own address as the client: not masqueraded (%s)", self.Name, res)
		}
	}
	t.Logf("hairpin: %s", res)
}
