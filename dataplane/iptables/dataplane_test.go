package iptables_test

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net/netip"
	"strings"
	"testing"

	"github.com/switchyard-proxy/switchyard/dataplane/conntrack"

	"github.com/google/go-cmp/cmp"

	"github.com/switchyard-proxy/switchyard/dataplane"
	"github.com/switchyard-proxy/switchyard/dataplane/iptables"
	"github.com/switchyard-proxy/switchyard/dataplane/iptables/iptablestest"
	"github.com/switchyard-proxy/switchyard/dataplane/xtables"
	switchyardv1 "github.com/switchyard-proxy/switchyard/proto/switchyard/v1"
)

func service(i int, eps ...string) *switchyardv1.ServiceView {
	sv := &switchyardv1.ServiceView{
		Namespace: "ns", Name: fmt.Sprintf("s%d", i),
		Type:       switchyardv1.ServiceType_SERVICE_TYPE_NODE_PORT,
		ClusterIps: []string{fmt.Sprintf("10.96.%d.%d", i/200, i%200+1), fmt.Sprintf("fd00:96::%x", i+1)},
		Ports: []*switchyardv1.ServicePort{{
			Name: "dns", Protocol: switchyardv1.Protocol_PROTOCOL_UDP, Port: 53, NodePort: uint32(30000 + i),
		}},
		HasAnyEndpoints: len(eps) > 0,
	}
	for _, a := range eps {
		sv.ClusterEndpoints = append(sv.ClusterEndpoints, &switchyardv1.Endpoint{
			Address: a, Ports: []*switchyardv1.EndpointPort{{Name: "dns", Port: 5353}}, Ready: true, Serving: true,
		})
	}
	return sv
}

func state(n int) *dataplane.State {
	st := &dataplane.State{
		Config:   &switchyardv1.NodeConfig{NodeName: "n", ClusterCidrs: []string{"10.244.0.0/16", "fd00:244::/64"}},
		Services: map[string]*switchyardv1.ServiceView{},
	}
	for i := range n {
		st.Services[fmt.Sprintf("ns/s%d", i)] = service(i,
			fmt.Sprintf("10.244.%d.%d", i/100, i%100+1), fmt.Sprintf("10.244.%d.%d", i/100, i%100+101),
			fmt.Sprintf("fd00:244::%x", i+1))
	}
	return st
}

func newDP(t *testing.T, f *iptablestest.Fake, mut ...func(*iptables.Config)) *iptables.Dataplane {
	t.Helper()
	f.CheckSetRefs = true // a restore matching a set that is not there yet fails
	cfg := iptables.Config{Runner: f, Flavour: xtables.FlavourLegacy}
	for _, m := range mut {
		m(&cfg)
	}
	d, err := iptables.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// applied is a Dataplane over a new Fake (newDP) that has applied st
// once: where most tests here start.
func applied(t *testing.T, st *dataplane.State, mut ...func(*iptables.Config)) (*iptablestest.Fake, *iptables.Dataplane) {
	t.Helper()
	f := iptablestest.New()
	d := newDP(t, f, mut...)
	apply(t, d, st, false)
	return f, d
}

// ipv4Only configures a Dataplane for IPv4 alone.
func ipv4Only(c *iptables.Config) { c.Families = []dataplane.Family{dataplane.IPv4} }

func restores(f *iptablestest.Fake) []string {
	var out []string
	for _, c := range f.Calls() {
		if strings.HasSuffix(c.Argv[0], "-restore") {
			out = append(out, c.Stdin)
		}
	}
	return out
}

func apply(t *testing.T, d *iptables.Dataplane, st *dataplane.State, full bool) {
	t.Helper()
	if err := d.Apply(t.Context(), st, dataplane.ApplyOptions{Full: full}); err != nil {
		t.Fatalf("Apply: %v", err)
	}
}

func TestApplyTwiceIsNoop(t *testing.T) {
	st := state(20)
	f, d := applied(t, st)
	before := f.Dump()
	f.ResetCalls()
	apply(t, d, st, false)
	if got := f.Calls(); len(got) != 0 {
		t.Errorf("second Apply ran %d commands, want none: %v", len(got), got[0].Argv)
	}
	// A full resync of the same state rewrites but changes nothing.
	apply(t, d, st, true)
	if d := cmp.Diff(before, f.Dump()); d != "" {
		t.Errorf("state changed (-before +after):\n%s", d)
	}
}

func TestPartialSyncWritesOnlyChangedChains(t *testing.T) {
	st := state(200)
	f, d := applied(t, st)
	f.ResetCalls()

	next := &dataplane.State{Config: st.Config, Services: maps.Clone(st.Services)}
	next.Services["ns/s7"] = service(7, "10.244.0.8", "10.244.9.9", "fd00:244::8")
	apply(t, d, next, false)

	rs := restores(f)
	if len(rs) != 1 { // IPv6 is unchanged
		t.Fatalf("got %d restores, want 1", len(rs))
	}
	v4 := rs[0]
	for _, forbidden := range []string{":KUBE-SERVICES", ":KUBE-SHARD-", ":KUBE-NODEPORTS", ":KUBE-SEP-", "*filter"} {
		if strings.Contains(v4, forbidden) {
			t.Errorf("partial restore touches %s:\n%s", forbidden, v4)
		}
	}
	if got := strings.Count(v4, "\n:KUBE-"); got != 1 || !strings.Contains(v4, "\n:KUBE-SVC-") {
		t.Errorf("want exactly the service chain rewritten, got %d chains:\n%s", got, v4)
	}
	if !strings.Contains(v4, "-j DNAT --to-destination 10.244.9.9:5353") {
		t.Errorf("new endpoint not DNATed from the service chain:\n%s", v4)
	}
	if s := d.LastSync(); s.ChainsWritten != 1 || s.ChainsRemoved != 0 || s.HairpinAdded != 1 || s.HairpinRemoved != 1 {
		t.Errorf("stats %+v, want 1 chain written (KUBE-SVC v4; v6 unchanged), 1 hairpin member added and 1 removed", s)
	}
	// The new endpoint's member goes in before the restore that DNATs to
	// it, the old one's out after the restore that stops.
	var order []string
	for _, c := range f.Calls() {
		first, _, _ := strings.Cut(c.Stdin, " ")
		first, _, _ = strings.Cut(first, "\n")
		order = append(order, c.Argv[0]+" "+first)
	}
	want := []string{"ipset add", "iptables-legacy-restore *nat", "ipset del"}
	if diff := cmp.Diff(want, order); diff != "" {
		t.Errorf("command order (-want +got):\n%s", diff)
	}

	// The kernel converged to what a fresh full sync produces.
	fresh, _ := applied(t, next)
	if diff := cmp.Diff(fresh.Dump(), f.Dump()); diff != "" {
		t.Errorf("partial sync diverged from full (-full +partial):\n%s", diff)
	}
}

func TestSequenceConvergesToFull(t *testing.T) {
	f := iptablestest.New()
	d := newDP(t, f)
	steps := []*dataplane.State{state(5), state(30), state(12), state(0), state(3)}
	// A service losing all endpoints and one changing ports.
	last := steps[len(steps)-1]
	last.Services["ns/s1"] = service(1)
	sv := service(2, "10.244.0.3")
	sv.Ports[0].Port = 5300
	last.Services["ns/s2"] = sv
	for i, st := range steps {
		apply(t, d, st, false)
		fresh, _ := applied(t, st)
		if diff := cmp.Diff(fresh.Dump(), f.Dump()); diff != "" {
			t.Fatalf("step %d diverged (-full +partial):\n%s", i, diff)
		}
	}
}

func TestBatchedFullSyncMatchesSingleRestore(t *testing.T) {
	st := state(50)
	one, _ := applied(t, st)
	many, _ := applied(t, st, func(c *iptables.Config) { c.MaxChainsPerRestore = 7 })
	if n := len(restores(many)); n < 10 {
		t.Errorf("batched sync used %d restores, want many", n)
	}
	if diff := cmp.Diff(one.Dump(), many.Dump()); diff != "" {
		t.Errorf("batched result differs:\n%s", diff)
	}
}

func TestFullSyncRepairsDrift(t *testing.T) {
	st := state(10)
	f, d := applied(t, st)
	want := f.Dump()
	// Someone deletes a jump and leaves a stale chain of ours behind.
	if err := f.Restore("iptables", "*nat\n-D PREROUTING -m comment --comment \"switchyard: kubernetes service portals\" -j KUBE-SERVICES\n:KUBE-SVC-STALE - [0:0]\n-A KUBE-SVC-STALE -j RETURN\nCOMMIT\n"); err != nil {
		t.Fatal(err)
	}
	apply(t, d, st, false) // partial: does not notice
	if f.Dump() == want {
		t.Fatal("drift not visible")
	}
	apply(t, d, st, true)
	if diff := cmp.Diff(want, f.Dump()); diff != "" {
		t.Errorf("full sync did not repair (-want +got):\n%s", diff)
	}
}

func TestCleanupLeavesForeignRules(t *testing.T) {
	f := iptablestest.New()
	for _, in := range []string{
		"*nat\n:DOCKER - [0:0]\n-A DOCKER -d 172.17.0.2 -j DNAT --to-destination 172.17.0.2:80\n-A PREROUTING -j DOCKER\nCOMMIT\n",
		"*filter\n-A INPUT -p tcp --dport 22 -j ACCEPT\nCOMMIT\n",
	} {
		if err := f.Restore("iptables", in); err != nil {
			t.Fatal(err)
		}
	}
	before := f.Dump()
	d := newDP(t, f, ipv4Only)
	apply(t, d, state(10), false)
	if err := d.Cleanup(t.Context()); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(before, f.Dump()); diff != "" {
		t.Errorf("cleanup left or removed something (-before +after):\n%s", diff)
	}
	// After cleanup the next Apply is a full one again.
	apply(t, d, state(2), false)
	if !strings.Contains(f.Dump(), "KUBE-SERVICES") {
		t.Error("apply after cleanup did not reprogram")
	}
}

func TestFailedApplyForcesFullResync(t *testing.T) {
	f, d := applied(t, state(5), ipv4Only)
	good := f.Dump()
	boom := errors.New("boom")
	f.Fail = func(argv []string, _ []byte) error {
		if strings.HasSuffix(argv[0], "-restore") {
			return boom
		}
		return nil
	}
	err := d.Apply(t.Context(), state(6), dataplane.ApplyOptions{})
	if !errors.Is(err, boom) {
		t.Fatalf("Apply error %v, want boom", err)
	}
	// The new endpoint's hairpin member went in before the failed restore
	// (harmless: no rule DNATs to it); the tables are untouched.
	if tables(f.Dump()) != tables(good) {
		t.Error("failed apply changed the tables")
	}
	f.Fail = nil
	f.ResetCalls()
	apply(t, d, state(6), false)
	if c := f.Calls(); len(c) < 2 || strings.Join(c[0].Argv, " ") != "ipset save KUBE-SWYD-HAIRPIN" || !strings.HasSuffix(c[1].Argv[0], "-save") {
		t.Errorf("apply after failure did not start with read-backs (full sync): %v", c)
	}
}

type recordedConntrack struct {
	flows map[dataplane.Family][]conntrack.Flow
}

func (r *recordedConntrack) DeleteUDP(_ context.Context, fam dataplane.Family, flows []conntrack.Flow) error {
	r.flows[fam] = append(r.flows[fam], flows...)
	return nil
}

func TestConntrackCleanupForUDP(t *testing.T) {
	ct := &recordedConntrack{flows: map[dataplane.Family][]conntrack.Flow{}}
	d := newDP(t, iptablestest.New(), func(c *iptables.Config) { c.Conntrack = ct })
	st := state(0)
	st.Services["ns/s0"] = service(0, "10.244.0.1", "10.244.0.101")
	st.Services["ns/s1"] = service(1)
	apply(t, d, st, false)
	if len(ct.flows) != 0 {
		t.Fatalf("first sync cleared %v", ct.flows)
	}
	next := state(0)
	next.Services["ns/s0"] = service(0, "10.244.0.1")
	next.Services["ns/s1"] = service(1, "10.244.0.2")
	apply(t, d, next, false)
	ep := netip.MustParseAddrPort("10.244.0.101:5353")
	want := []conntrack.Flow{
		{Dst: netip.MustParseAddrPort("10.96.0.1:53"), Endpoint: ep},
		{Dst: netip.AddrPortFrom(netip.Addr{}, 30000), NodePort: true, Endpoint: ep},
		{Dst: netip.MustParseAddrPort("10.96.0.2:53")},
		{Dst: netip.AddrPortFrom(netip.Addr{}, 30001), NodePort: true},
	}
	if diff := cmp.Diff(want, ct.flows[dataplane.IPv4], cmp.Comparer(func(a, b netip.Addr) bool { return a == b }),
		cmp.Comparer(func(a, b netip.AddrPort) bool { return a == b })); diff != "" {
		t.Errorf("stale flows (-want +got):\n%s", diff)
	}
	if len(ct.flows[dataplane.IPv6]) != 0 {
		t.Errorf("IPv6 had no UDP endpoints, got %v", ct.flows[dataplane.IPv6])
	}
}

func TestConntrackFailureKeepsPartialSync(t *testing.T) {
	f := iptablestest.New()
	d := newDP(t, f, func(c *iptables.Config) {
		c.Conntrack = failingConntrack{}
		c.Families = []dataplane.Family{dataplane.IPv4}
	})
	apply(t, d, state(2), false)
	err := d.Apply(t.Context(), state(1), dataplane.ApplyOptions{})
	if !dataplane.IsConntrackError(err) {
		t.Fatalf("got %v, want a dataplane.ConntrackError", err)
	}
	f.ResetCalls()
	apply(t, d, state(1), false)
	if c := f.Calls(); len(c) != 0 {
		t.Errorf("rules were applied; want no command after a conntrack-only failure, got %v", c[0].Argv)
	}
}

type failingConntrack struct{}

func (failingConntrack) DeleteUDP(context.Context, dataplane.Family, []conntrack.Flow) error {
	return errors.New("netlink down")
}

// tables cuts the ipset part off a Fake dump.
func tables(dump string) string {
	before, _, _ := strings.Cut(dump, "# ipset\n")
	return before
}
