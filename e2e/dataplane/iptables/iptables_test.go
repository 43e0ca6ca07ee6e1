package iptables

import (
	"net/netip"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/switchyard-proxy/switchyard/dataplane"
	"github.com/switchyard-proxy/switchyard/dataplane/iptables"
	"github.com/switchyard-proxy/switchyard/dataplane/xtables"
	"github.com/switchyard-proxy/switchyard/e2e/dataplane/dptest"
	"github.com/switchyard-proxy/switchyard/e2e/testbed/netns"
)

func TestMain(m *testing.M) { dptest.Main(m) }

// runnerOptions run iptables and ipset through "ip netns exec" in the
// node namespace and record restore inputs and ipset writes.
var runnerOptions = dptest.RunnerOptions{Record: record}

// The runner's logs: restore inputs, and "ipset <args> | <stdin>" of
// every ipset command but save and list.
const (
	restoreLog = "restore"
	ipsetLog   = "ipset"
)

func record(argv []string, stdin []byte) (log, entry string) {
	switch {
	case strings.HasSuffix(argv[0], "-restore"):
		return restoreLog, string(stdin)
	case argv[0] == "ipset" && len(argv) > 1 && argv[1] != "save" && argv[1] != "list":
		return ipsetLog, strings.Join(argv, " ") + " | " + string(stdin)
	}
	return "", ""
}

type bed struct {
	*dptest.Bed
	dp *iptables.Dataplane
}

// newBed is an IPv4-only bed.
func newBed(t *testing.T) *bed {
	t.Helper()
	return newBedFor(t, dataplane.IPv4, false)
}

// newBedFor is the bed of a family's test (dptest.NewBedFor); with
// cleanup its Dataplane deletes stale UDP conntrack entries, through
// netlink in the node namespace, as the agent does.
func newBedFor(t *testing.T, f dataplane.Family, cleanup bool) *bed {
	t.Helper()
	b := &bed{Bed: dptest.NewBedFor(t, f, runnerOptions)}
	b.dp = b.newDP(t, iptables.Config{Logger: netns.TestLogger(t), Conntrack: b.Conntrack(t, cleanup)})
	return b
}

// modeBed is this mode's dptest.ModeBed.
func modeBed(t *testing.T, f dataplane.Family, cleanup bool) (*dptest.Bed, dptest.Apply) {
	b := newBedFor(t, f, cleanup)
	return b.Bed, b.apply
}

// newDP builds a Dataplane on the bed's runner: IPv4 only, or iptables
// and ip6tables on a dual-stack bed.
func (b *bed) newDP(t *testing.T, cfg iptables.Config) *iptables.Dataplane {
	t.Helper()
	cfg.Runner, cfg.Families = b.Runner, b.NodeFamilies()
	dp, err := iptables.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return dp
}

// flavours are the iptables flavours every flavour-dependent test runs
// on.
var flavours = []xtables.Flavour{xtables.FlavourNFT, xtables.FlavourLegacy}

// forFamiliesAndFlavours runs fn over dptest.Families and flavours, as
// subtests "<family>/<flavour>", each on a fresh bed of the family
// (newBedFor, without conntrack cleanup).
func forFamiliesAndFlavours(t *testing.T, fn func(t *testing.T, b *bed, fl xtables.Flavour)) {
	t.Helper()
	dptest.ForFamilies(t, func(t *testing.T, f dataplane.Family) {
		for _, fl := range flavours {
			t.Run(string(fl), func(t *testing.T) { fn(t, newBedFor(t, f, false), fl) })
		}
	})
}

func (b *bed) apply(t *testing.T, st *dataplane.State) {
	t.Helper()
	dptest.MustApply(t, b.dp, st)
}

var vip = netip.MustParseAddrPort("10.96.0.10:80")

// TestPortWithoutEndpointsRefused: endpoints are decided per service port
// (issue 17). A two-port service whose slices name one port refuses the
// other at once, on its cluster IP and node port, while the first serves.
func TestPortWithoutEndpointsRefused(t *testing.T) {
	b := newBed(t)
	b.CheckPortWithoutEndpoints(t, vip.Addr(), b.apply)
}

// TestPartialSyncTouchesOnlyChangedChains removes one endpoint of one of
// 50 services and checks in the kernel that exactly that service's
// KUBE-SVC chain changed (services without affinity have no KUBE-SEP
// chains), then moves a service to a new endpoint port and checks the
// hairpin set gains the new member and loses the old one.
func TestPartialSyncTouchesOnlyChangedChains(t *testing.T) {
	b := newBed(t)
	svcs := dptest.ManyServices(50, b.Pods...)
	b.apply(t, dptest.State(b.Node, svcs...))
	before := b.save(t)
	b.Runner.Take(restoreLog)
	b.Runner.Take(ipsetLog)

	svcs[7] = dptest.Service("s7", "10.96.1.8", 80, 0, b.Pods[0], b.Pods[1]) // one endpoint gone
	b.apply(t, dptest.State(b.Node, svcs...))
	rs := b.Runner.Take(restoreLog)
	if len(rs) != 1 {
		t.Fatalf("want one restore, got %d", len(rs))
	}
	if declared := declaredChains(rs[0]); len(declared) != 1 || !strings.HasPrefix(declared[0], "KUBE-SVC-") {
		t.Errorf("restore declared %v, want only the service's KUBE-SVC", declared)
	}
	if got := b.Runner.Take(ipsetLog); len(got) != 0 {
		t.Errorf("the gone endpoint still serves 49 services, yet ipset ran: %q", got)
	}
	after := b.save(t)
	changed := dptest.Changed(before, after)
	if len(changed) != 1 || !strings.HasPrefix(changed[0], "KUBE-SVC-") {
		t.Errorf("iptables-save shows changed chains %v, want only the service's KUBE-SVC", changed)
	}
	// Traffic still reaches the two remaining backends.
	b.CheckAnsweredBy(t, b.Node.NS, netip.MustParseAddrPort("10.96.1.8:80"), 20, 2, "after partial sync")

	// A new endpoint port: one member in before the restore, the old
	// one out after, the rest of the set untouched.
	moved := dptest.Service("s9", "10.96.1.10", 80, 0, b.Pods[0])
	moved.ClusterEndpoints[0].Ports[0].Port = 8081
	svcs[9] = moved
	b.apply(t, dptest.State(b.Node, svcs...))
	p0 := b.Pods[0].IP.String()
	want := []string{
		"ipset restore -exist | add KUBE-SWYD-HAIRPIN " + p0 + ",tcp:8081," + p0 + "\n",
	}
	if diff := cmp.Diff(want, b.Runner.Take(ipsetLog)); diff != "" {
		t.Errorf("ipset writes (-want +got):\n%s", diff)
	}
	if !strings.Contains(b.ipsetSave(t), "add KUBE-SWYD-HAIRPIN "+p0+",tcp:8081,"+p0) {
		t.Errorf("new member missing:\n%s", b.ipsetSave(t))
	}
	svcs[9] = dptest.Service("s9", "10.96.1.10", 80, 0, b.Pods...) // back: 8081 gone
	b.apply(t, dptest.State(b.Node, svcs...))
	want = []string{"ipset restore -exist | del KUBE-SWYD-HAIRPIN " + p0 + ",tcp:8081," + p0 + "\n"}
	if diff := cmp.Diff(want, b.Runner.Take(ipsetLog)); diff != "" {
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
	out, err := b.Topo.Exec(t.Context(), b.Node.NS, "ipset", "save")
	if err != nil {
		t.Fatal(err)
	}
	return string(out)
}

// save reads the nat table back as chain → rules.
func (b *bed) save(t *testing.T) map[string]string {
	t.Helper()
	out, err := b.Topo.Exec(t.Context(), b.Node.NS, "iptables-save", "-t", "nat")
	if err != nil {
		// The flavour may be legacy in this namespace.
		out, err = b.Topo.Exec(t.Context(), b.Node.NS, "iptables-legacy-save", "-t", "nat")
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

func TestSecondApplyIsNoopAndCleanupRemovesOnlyOurs(t *testing.T) {
	b := newBed(t)
	foreign := "*nat\n:FOREIGN - [0:0]\n-A FOREIGN -p tcp --dport 9 -j RETURN\n-A PREROUTING -j FOREIGN\nCOMMIT\n"
	if _, err := b.Topo.ExecInput(t.Context(), b.Node.NS, strings.NewReader(foreign), "iptables-restore", "--noflush"); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Topo.Exec(t.Context(), b.Node.NS, "ipset", "create", "FOREIGN-SET", "hash:ip"); err != nil {
		t.Fatal(err)
	}
	st := dptest.State(b.Node, dptest.Service("web", vip.Addr().String(), 80, 30080, b.Pods...))
	b.apply(t, st)
	b.Runner.Take(restoreLog)
	b.Runner.Take(ipsetLog)
	b.apply(t, st)
	if rs := b.Runner.Take(restoreLog); len(rs) != 0 {
		t.Errorf("second Apply of the same state ran %d restores", len(rs))
	}
	if w := b.Runner.Take(ipsetLog); len(w) != 0 {
		t.Errorf("second Apply of the same state ran ipset: %q", w)
	}
	if err := b.dp.Cleanup(t.Context()); err != nil {
		t.Fatal(err)
	}
	if sets, err := b.Topo.Exec(t.Context(), b.Node.NS, "ipset", "list", "-n"); err != nil || string(sets) != "FOREIGN-SET\n" {
		t.Errorf("ipsets after Cleanup: %q %v, want only FOREIGN-SET", sets, err)
	}
	for _, table := range []string{"nat", "filter"} {
		out, err := b.Topo.Exec(t.Context(), b.Node.NS, "iptables-save", "-t", table)
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

// TestFullResyncOfUnchangedStateWritesNothing checks, on both flavours
// and in both families (iptables alone on an IPv4-only bed, iptables and
// ip6tables on a dual-stack one, every service with an address of each
// family), that the read-back comparison recognises every rule form we
// render as iptables-save and ip6tables-save print it back.
func TestFullResyncOfUnchangedStateWritesNothing(t *testing.T) {
	forFamiliesAndFlavours(t, func(t *testing.T, b *bed, fl xtables.Flavour) {
		dp := b.newDP(t, iptables.Config{Flavour: fl})
		st := b.RuleFormState()
		if err := dp.Apply(t.Context(), st, dataplane.ApplyOptions{}); err != nil {
			t.Fatal(err)
		}
		if b.DualStack() { // not vacuous: the IPv6 rules are in the kernel
			out, err := b.Topo.Exec(t.Context(), b.Node.NS, "ip6tables-"+string(fl)+"-save", "-t", "nat")
			if vip := dptest.ServiceIP(dataplane.IPv6, 10).String(); err != nil || !strings.Contains(string(out), "-d "+vip+"/128") {
				t.Fatalf("ip6tables-save has no rule for %s: %v\n%s", vip, err, out)
			}
		}
		b.Runner.Take(restoreLog)
		b.Runner.Take(ipsetLog)
		if err := dp.Apply(t.Context(), st, dataplane.ApplyOptions{Full: true}); err != nil {
			t.Fatal(err)
		}
		if w := b.Runner.Take(ipsetLog); len(w) != 0 {
			t.Errorf("full resync of an unchanged state wrote the hairpin set: %q\n%s", w, b.ipsetSave(t))
		}
		if s := dp.LastSync(); s.ChainsWritten != 0 || s.Restores != 0 {
			var saved []byte
			for _, bin := range []string{"iptables", "ip6tables"} {
				out, _ := b.Topo.Exec(t.Context(), b.Node.NS, bin+"-"+string(fl)+"-save")
				saved = append(saved, out...)
			}
			t.Errorf("full resync of an unchanged state: %+v; restores:\n%s\nkernel:\n%s",
				s, strings.Join(b.Runner.Take(restoreLog), "\n"), saved)
		}
	})
}
