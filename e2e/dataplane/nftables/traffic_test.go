package nftables

import (
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"testing"

	"github.com/switchyard-proxy/switchyard/dataplane"
	"github.com/switchyard-proxy/switchyard/dataplane/nftables"
	"github.com/switchyard-proxy/switchyard/e2e/dataplane/dptest"
	"github.com/switchyard-proxy/switchyard/e2e/testbed/probe"
	switchyardv1 "github.com/switchyard-proxy/switchyard/proto/switchyard/v1"
	"google.golang.org/protobuf/proto"
)

func TestClusterIPAndNodePort(t *testing.T) {
	b := newBed(t)
	b.apply(t, dptest.State(b.Node, dptest.Service("web", vip.Addr().String(), 80, 30080, b.Pods...)))
	for _, tc := range []struct {
		name, ns string
		dst      netip.AddrPort
	}{
		{"cluster IP from node (output hook)", b.Node.NS, vip},
		{"cluster IP from client (prerouting hook)", b.Topo.Client().NS, vip},
		{"node port from client", b.Topo.Client().NS, netip.AddrPortFrom(b.Node.IP, 30080)},
	} {
		t.Run(tc.name, func(t *testing.T) { b.CheckSpread(t, tc.ns, tc.dst) })
	}
}

func TestAffinityPinsClient(t *testing.T) {
	b := newBed(t)
	sv := dptest.Service("sticky", vip.Addr().String(), 80, 0, b.Pods...)
	sv.Type = switchyardv1.ServiceType_SERVICE_TYPE_CLUSTER_IP
	sv.SessionAffinity = switchyardv1.SessionAffinity_SESSION_AFFINITY_CLIENT_IP
	sv.SessionAffinityTimeoutSeconds = 600
	b.apply(t, dptest.State(b.Node, sv))
	b.CheckPinned(t, b.Topo.Client().NS, vip)
}

func TestNoEndpointsRefusedFast(t *testing.T) {
	b := newBed(t)
	b.apply(t, dptest.State(b.Node, dptest.Service("empty", vip.Addr().String(), 80, 30082)))
	for _, tc := range []struct {
		name, ns string
		dst      netip.AddrPort
	}{
		{"cluster IP from node", b.Node.NS, vip},
		{"cluster IP from client", b.Topo.Client().NS, vip},
		{"node port from client", b.Topo.Client().NS, netip.AddrPortFrom(b.Node.IP, 30082)},
	} {
		t.Run(tc.name, func(t *testing.T) { b.CheckRefusedFast(t, tc.ns, tc.dst) })
	}
}

// TestPortWithoutEndpointsRefused: endpoints are decided per service port
// (issue 17). A two-port service whose slices name one port refuses the
// other at once, on its cluster IP and node port, while the first serves.
func TestPortWithoutEndpointsRefused(t *testing.T) {
	b := newBed(t)
	b.CheckPortWithoutEndpoints(t, vip.Addr(), b.apply)
}

func TestETPLocalDropsWithoutLocalEndpoints(t *testing.T) {
	b := newBed(t)
	sv := dptest.Service("local", vip.Addr().String(), 80, 30081, b.Pods...)
	sv.ExternalTrafficPolicy = switchyardv1.TrafficPolicy_TRAFFIC_POLICY_LOCAL
	b.apply(t, dptest.State(b.Node, sv)) // endpoints exist, none local: DROP
	np := netip.AddrPortFrom(b.Node.IP, 30081)
	b.CheckDropped(t, b.Topo.Client().NS, np)
	// Traffic from the node itself and from its pods is not subject to the
	// policy: it is short-circuited to the cluster endpoints, as kube-proxy
	// does (upstream e2e "should implement NodePort and HealthCheckNodePort
	// correctly when ExternalTrafficPolicy changes" curls its own node's
	// NodePort from a host-network pod).
	b.CheckAnswered(t, b.Node.NS, np, 10, "own node port from the node under ETP Local")
	b.CheckAnswered(t, b.Pods[0].NS, np, 10, "own node port from a pod under ETP Local")
	// The cluster IP still uses cluster endpoints.
	b.CheckAnswered(t, b.Node.NS, vip, 10, "cluster IP under ETP Local")
	// With a local endpoint the node port answers, from that one only.
	// (A new message: Apply may keep what it was given, see State.)
	sv = proto.Clone(sv).(*switchyardv1.ServiceView)
	sv.LocalEndpoints = sv.ClusterEndpoints[:1]
	sv.LocalEndpoints[0].IsLocal = true
	b.apply(t, dptest.State(b.Node, sv))
	b.CheckAnsweredBy(t, b.Topo.Client().NS, np, 10, 1, "node port with a local endpoint")
}

func TestPartialSyncTouchesOnlyChangedObjects(t *testing.T) {
	b := newBed(t)
	var svcs []*switchyardv1.ServiceView
	for i := range 50 {
		svcs = append(svcs, dptest.Service(fmt.Sprintf("s%d", i), fmt.Sprintf("10.96.1.%d", i+1), 80, 0, b.Pods...))
	}
	b.apply(t, dptest.State(b.Node, svcs...))
	before := blocksOf(b.listTable(t))
	b.Runner.Take(nftInputs)

	svcs[7] = dptest.Service("s7", "10.96.1.8", 80, 0, b.Pods[0], b.Pods[1]) // one endpoint gone
	b.apply(t, dptest.State(b.Node, svcs...))
	txs := b.Runner.Take(nftInputs)
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
	b.CheckAnsweredBy(t, b.Node.NS, netip.MustParseAddrPort("10.96.1.8:80"), 20, 2, "after partial sync")
}

func TestSecondApplyIsNoopFullResyncAndCleanup(t *testing.T) {
	b := newBed(t)
	foreign := "add table ip foreign\nadd chain ip foreign c\nadd rule ip foreign c tcp dport 9 return\n"
	if _, err := b.Runner.Run(t.Context(), []string{"nft", "-f", "-"}, []byte(foreign)); err != nil {
		t.Fatal(err)
	}
	web := dptest.Service("web", "10.96.0.10", 80, 30080, b.Pods...)
	sticky := dptest.Service("sticky", "10.96.0.11", 80, 0, b.Pods...)
	sticky.SessionAffinity = switchyardv1.SessionAffinity_SESSION_AFFINITY_CLIENT_IP
	sticky.SessionAffinityTimeoutSeconds = 60
	lb := dptest.Service("lb", "10.96.0.12", 443, 30443, b.Pods[0])
	lb.Type = switchyardv1.ServiceType_SERVICE_TYPE_LOAD_BALANCER
	lb.LoadBalancerIps = []string{"203.0.113.9"}
	lb.LoadBalancerSourceRanges = []string{"198.51.100.0/24"}
	lb.ExternalIps = []string{"192.0.2.9"}
	lb.ExternalTrafficPolicy = switchyardv1.TrafficPolicy_TRAFFIC_POLICY_LOCAL
	lb.LocalEndpoints = lb.ClusterEndpoints
	dns := dptest.Service("dns", "10.96.0.13", 53, 0, b.Pods...)
	dns.Ports[0].Protocol = switchyardv1.Protocol_PROTOCOL_UDP
	st := dptest.State(b.Node, web, sticky, lb, dns, dptest.Service("empty", "10.96.0.14", 80, 30081))
	b.apply(t, st)
	b.Runner.Take(nftInputs)
	b.apply(t, st)
	if txs := b.Runner.Take(nftInputs); len(txs) != 0 {
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
	if err := restarted.Apply(t.Context(), dptest.State(b.Node, web), dataplane.ApplyOptions{}); err != nil {
		t.Fatalf("first Apply after restart: %v", err)
	}
	if got := b.listTable(t); strings.Contains(got, "default/sticky/") || strings.Contains(got, "default/lb/") {
		t.Errorf("leftovers after restart:\n%s", got)
	}
	if err := restarted.Cleanup(t.Context()); err != nil {
		t.Fatal(err)
	}
	out, err := b.Topo.Exec(t.Context(), b.Node.NS, "nft", "list", "tables")
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(out), "switchyard") || !strings.Contains(string(out), "table ip foreign") {
		t.Errorf("after Cleanup: %s", out)
	}
	// Traffic no longer reaches the service.
	res, err := probe.New(b.Topo, b.Node.NS).TCP(t.Context(), vip, probe.Options{Count: 1})
	if err != nil || res.Succeeded() != 0 {
		t.Errorf("service still answers after Cleanup: %v %v", err, res)
	}
}

// TestRunnerStaysInNodeNamespace guards the fork-from-a-thread runner:
// the table must appear in the node namespace and nowhere else we can see.
func TestRunnerStaysInNodeNamespace(t *testing.T) {
	b := newBed(t)
	b.apply(t, dptest.State(b.Node, dptest.Service("web", vip.Addr().String(), 80, 0, b.Pods...)))
	for _, ns := range []string{b.Topo.Client().NS, b.Pods[0].NS} {
		out, err := b.Topo.Exec(t.Context(), ns, "nft", "list", "tables")
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
	self := b.Pods[0]
	b.apply(t, dptest.State(b.Node, dptest.Service("self", vip.Addr().String(), 80, 0, self)))
	res, err := probe.New(b.Topo, self.NS).TCP(t.Context(), vip, probe.Options{Count: 10})
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
