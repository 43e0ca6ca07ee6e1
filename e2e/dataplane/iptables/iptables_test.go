package iptables

import (
	"bytes"
	"context"
	"fmt"
	"github.com/switchyard-proxy/switchyard/e2e/dataplane/dptest"
	"net/netip"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/switchyard-proxy/switchyard/dataplane"
	"github.com/switchyard-proxy/switchyard/dataplane/iptables"
	"github.com/switchyard-proxy/switchyard/e2e/testbed/echo"
	"github.com/switchyard-proxy/switchyard/e2e/testbed/netns"
	"github.com/switchyard-proxy/switchyard/e2e/testbed/probe"
	switchyardv1 "github.com/switchyard-proxy/switchyard/proto/switchyard/v1"
)

func TestMain(m *testing.M) {
	if code, ok := echo.RunChild(); ok {
		os.Exit(code)
	}
	os.Exit(m.Run())
}

// nsRunner runs iptables and ipset commands in one namespace of the
// topology and records restore inputs and ipset writes.
type nsRunner struct {
	topo *netns.Topology
	ns   string

	mu       sync.Mutex
	restores []string
	ipsets   []string // "ipset <args> | <stdin>" of every command but save and list
}

func (r *nsRunner) Run(ctx context.Context, argv []string, stdin []byte) ([]byte, error) {
	r.mu.Lock()
	switch {
	case strings.HasSuffix(argv[0], "-restore"):
		r.restores = append(r.restores, string(stdin))
	case argv[0] == "ipset" && len(argv) > 1 && argv[1] != "save" && argv[1] != "list":
		r.ipsets = append(r.ipsets, strings.Join(argv, " ")+" | "+string(stdin))
	}
	r.mu.Unlock()
	return r.topo.ExecInput(ctx, r.ns, bytes.NewReader(stdin), argv...)
}

func (r *nsRunner) takeRestores() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := r.restores
	r.restores = nil
	return out
}

func (r *nsRunner) takeIPSets() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := r.ipsets
	r.ipsets = nil
	return out
}

type bed struct {
	topo   *netns.Topology
	node   netns.Node
	pods   []netns.Pod
	runner *nsRunner
	dp     *iptables.Dataplane
}

func newBed(t *testing.T) *bed {
	t.Helper()
	topo := netns.New(t, netns.Spec{Nodes: 1, Pods: 3})
	if _, err := echo.StartPods(t.Context(), echo.Launcher{Topo: topo}, topo.Pods(),
		echo.Config{TCP: ":8080", UDP: ":8080", ReportClient: true}); err != nil {
		t.Fatalf("echo servers: %v", err)
	}
	node := topo.Node(0)
	r := &nsRunner{topo: topo, ns: node.NS}
	dp, err := iptables.New(iptables.Config{
		Runner: r, Families: []iptables.Family{iptables.IPv4}, Logger: netns.TestLogger(t),
	})
	if err != nil {
		t.Fatal(err)
	}
	return &bed{topo: topo, node: node, pods: topo.Pods(), runner: r, dp: dp}
}

func (b *bed) apply(t *testing.T, st *dataplane.State) {
	t.Helper()
	if err := b.dp.Apply(t.Context(), st, dataplane.ApplyOptions{}); err != nil {
		t.Fatalf("Apply: %v", err)
	}
}

var vip = netip.MustParseAddrPort("10.96.0.10:80")

func TestClusterIPFromNodeAndClient(t *testing.T) {
	b := newBed(t)
	b.apply(t, dptest.State(b.node, dptest.Service("web", vip.Addr().String(), 80, 30080, b.pods...)))
	for _, from := range []struct{ name, ns string }{
		{"node (OUTPUT)", b.node.NS}, {"client (PREROUTING)", b.topo.Client().NS},
	} {
		t.Run(from.name, func(t *testing.T) {
			res, err := probe.New(b.topo, from.ns).TCP(t.Context(), vip, probe.Options{Count: 300, Parallel: 8})
			if err != nil {
				t.Fatal(err)
			}
			dptest.CheckShares(t, res, 3)
		})
	}
	t.Run("NodePort on the node IP", func(t *testing.T) {
		np := netip.AddrPortFrom(b.node.IP, 30080)
		res, err := probe.New(b.topo, b.topo.Client().NS).TCP(t.Context(), np, probe.Options{Count: 300, Parallel: 8})
		if err != nil {
			t.Fatal(err)
		}
		dptest.CheckShares(t, res, 3)
	})
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
	b.apply(t, dptest.State(b.node, dptest.Service("empty", vip.Addr().String(), 80, 0)))
	for _, ns := range []string{b.node.NS, b.topo.Client().NS} {
		res, err := probe.New(b.topo, ns).TCP(t.Context(), vip, probe.Options{Count: 5, Timeout: 2 * time.Second})
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
}

// TestPartialSyncTouchesOnlyChangedChains removes one endpoint of one of
// 50 services and checks in the kernel that exactly that service's
// KUBE-SVC chain changed (services without affinity have no KUBE-SEP
// chains), then moves a service to a new endpoint port and checks the
// hairpin set gains the new member and loses the old one.
func TestPartialSyncTouchesOnlyChangedChains(t *testing.T) {
	b := newBed(t)
	var svcs []*switchyardv1.ServiceView
	for i := range 50 {
		svcs = append(svcs, dptest.Service(fmt.Sprintf("s%d", i), fmt.Sprintf("10.96.1.%d", i+1), 80, 0, b.pods...))
	}
	b.apply(t, dptest.State(b.node, svcs...))
	before := b.save(t)
	b.runner.takeRestores()
	b.runner.takeIPSets()

	svcs[7] = dptest.Service("s7", "10.96.1.8", 80, 0, b.pods[0], b.pods[1]) // one endpoint gone
	b.apply(t, dptest.State(b.node, svcs...))
	rs := b.runner.takeRestores()
	if len(rs) != 1 {
		t.Fatalf("want one restore, got %d", len(rs))
	}
	if declared := declaredChains(rs[0]); len(declared) != 1 || !strings.HasPrefix(declared[0], "KUBE-SVC-") {
		t.Errorf("restore declared %v, want only the service's KUBE-SVC", declared)
	}
	if got := b.runner.takeIPSets(); len(got) != 0 {
		t.Errorf("the gone endpoint still serves 49 services, yet ipset ran: %q", got)
	}
	after := b.save(t)
	changed := diffChains(before, after)
	if len(changed) != 1 || !strings.HasPrefix(changed[0], "KUBE-SVC-") {
		t.Errorf("iptables-save shows changed chains %v, want only the service's KUBE-SVC", changed)
	}
	// Traffic still reaches the two remaining backends.
	res, err := probe.New(b.topo, b.node.NS).TCP(t.Context(), netip.MustParseAddrPort("10.96.1.8:80"), probe.Options{Count: 20})
	if err != nil || len(res.Failures) > 0 || len(res.Counts) != 2 {
		t.Fatalf("after partial sync: %v %v %v", err, res.Counts, res.Failures)
	}

	// A new endpoint port: one member in before the restore, the old
	// one out after, the rest of the set untouched.
	moved := dptest.Service("s9", "10.96.1.10", 80, 0, b.pods[0])
	moved.ClusterEndpoints[0].Ports[0].Port = 8081
	svcs[9] = moved
	b.apply(t, dptest.State(b.node, svcs...))
	p0 := b.pods[0].IP.String()
	want := []string{
		"ipset restore -exist | add KUBE-SWYD-HAIRPIN " + p0 + ",tcp:8081," + p0 + "\n",
	}
	if diff := cmp.Diff(want, b.runner.takeIPSets()); diff != "" {
		t.Errorf("ipset writes (-want +got):\n%s", diff)
	}
	if !strings.Contains(b.ipsetSave(t), "add KUBE-SWYD-HAIRPIN "+p0+",tcp:8081,"+p0) {
		t.Errorf("new member missing:\n%s", b.ipsetSave(t))
	}
	svcs[9] = dptest.Service("s9", "10.96.1.10", 80, 0, b.pods...) // back: 8081 gone
	b.apply(t, dptest.State(b.node, svcs...))
	want = []string{"ipset restore -exist | del KUBE-SWYD-HAIRPIN " + p0 + ",tcp:8081," + p0 + "\n"}
	if diff := cmp.Diff(want, b.runner.takeIPSets()); diff != "" {
		t.Errorf("ipset writes (-want +got):\n%s", diff)
	}
}

func declaredChains(restore string) []string {
	var out []string
	for _, l := range strings.Split(restore, "\n") {
		if strings.HasPrefix(l, ":") {
			name, _, _ := strings.Cut(l[1:], " ")
			out = append(out, name)
		}
	}
	return out
}

// ipsetSave returns `ipset save` of the node namespace.
func (b *bed) ipsetSave(t *testing.T) string {
	t.Helper()
	out, err := b.topo.Exec(t.Context(), b.node.NS, "ipset", "save")
	if err != nil {
		t.Fatal(err)
	}
	return string(out)
}

// save reads the nat table back as chain → rules.
func (b *bed) save(t *testing.T) map[string]string {
	t.Helper()
	out, err := b.topo.Exec(t.Context(), b.node.NS, "iptables-save", "-t", "nat")
	if err != nil {
		// The flavour may be legacy in this namespace.
		out, err = b.topo.Exec(t.Context(), b.node.NS, "iptables-legacy-save", "-t", "nat")
	}
	if err != nil {
		t.Fatal(err)
	}
	chains := map[string]string{}
	for _, l := range strings.Split(string(out), "\n") {
		switch {
		case strings.HasPrefix(l, ":"):
			name, _, _ := strings.Cut(l[1:], " ")
			chains[name] += ""
		case strings.HasPrefix(l, "-A "):
			name, rule, _ := strings.Cut(l[3:], " ")
			chains[name] += rule + "\n"
		}
	}
	return chains
}

func diffChains(a, b map[string]string) []string {
	var out []string
	for n, r := range a {
		if r2, ok := b[n]; !ok || r2 != r {
			out = append(out, n)
		}
	}
	for n := range b {
		if _, ok := a[n]; !ok {
			out = append(out, n)
		}
	}
	return out
}

func TestSecondApplyIsNoopAndCleanupRemovesOnlyOurs(t *testing.T) {
	b := newBed(t)
	foreign := "*nat\n:FOREIGN - [0:0]\n-A FOREIGN -p tcp --dport 9 -j RETURN\n-A PREROUTING -j FOREIGN\nCOMMIT\n"
	if _, err := b.topo.ExecInput(t.Context(), b.node.NS, strings.NewReader(foreign), "iptables-restore", "--noflush"); err != nil {
		t.Fatal(err)
	}
	if _, err := b.topo.Exec(t.Context(), b.node.NS, "ipset", "create", "FOREIGN-SET", "hash:ip"); err != nil {
		t.Fatal(err)
	}
	st := dptest.State(b.node, dptest.Service("web", vip.Addr().String(), 80, 30080, b.pods...))
	b.apply(t, st)
	b.runner.takeRestores()
	b.runner.takeIPSets()
	b.apply(t, st)
	if rs := b.runner.takeRestores(); len(rs) != 0 {
		t.Errorf("second Apply of the same state ran %d restores", len(rs))
	}
	if w := b.runner.takeIPSets(); len(w) != 0 {
		t.Errorf("second Apply of the same state ran ipset: %q", w)
	}
	if err := b.dp.Cleanup(t.Context()); err != nil {
		t.Fatal(err)
	}
	if sets, err := b.topo.Exec(t.Context(), b.node.NS, "ipset", "list", "-n"); err != nil || string(sets) != "FOREIGN-SET\n" {
		t.Errorf("ipsets after Cleanup: %q %v, want only FOREIGN-SET", sets, err)
	}
	for _, table := range []string{"nat", "filter"} {
		out, err := b.topo.Exec(t.Context(), b.node.NS, "iptables-save", "-t", table)
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(string(out), "KUBE-") {
			t.Errorf("%s still holds our rules after Cleanup:\n%s", table, out)
		}
		if table == "nat" && !strings.Contains(string(out), "-A PREROUTING -j FOREIGN") {
			t.Errorf("Cleanup removed a foreign rule:\n%s", out)
		}
	}
}

// TestFullResyncOfUnchangedStateWritesNothing checks, on both flavours,
// that the read-back comparison recognises every rule form we render as
// iptables-save prints it back.
func TestFullResyncOfUnchangedStateWritesNothing(t *testing.T) {
	for _, fl := range []iptables.Flavour{iptables.FlavourNFT, iptables.FlavourLegacy} {
		t.Run(string(fl), func(t *testing.T) {
			b := newBed(t)
			dp, err := iptables.New(iptables.Config{Runner: b.runner, Families: []iptables.Family{iptables.IPv4}, Flavour: fl})
			if err != nil {
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
			lb.HealthCheckNodePort = 32000
			dns := dptest.Service("dns", "10.96.0.13", 53, 0, b.pods...)
			dns.Ports[0].Protocol = switchyardv1.Protocol_PROTOCOL_UDP
			empty := dptest.Service("empty", "10.96.0.14", 80, 30081)
			st := dptest.State(b.node, web, sticky, lb, dns, empty)
			if err := dp.Apply(t.Context(), st, dataplane.ApplyOptions{}); err != nil {
				t.Fatal(err)
			}
			b.runner.takeRestores()
			b.runner.takeIPSets()
			if err := dp.Apply(t.Context(), st, dataplane.ApplyOptions{Full: true}); err != nil {
				t.Fatal(err)
			}
			if w := b.runner.takeIPSets(); len(w) != 0 {
				t.Errorf("full resync of an unchanged state wrote the hairpin set: %q\n%s", w, b.ipsetSave(t))
			}
			if s := dp.LastSync(); s.ChainsWritten != 0 || s.Restores != 0 {
				saved, _ := b.topo.Exec(t.Context(), b.node.NS, "iptables-"+string(fl)+"-save")
				t.Errorf("full resync of an unchanged state: %+v; restores:\n%s\nkernel:\n%s",
					s, strings.Join(b.runner.takeRestores(), "\n"), saved)
			}
		})
	}
}
