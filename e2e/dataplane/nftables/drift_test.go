package nftables

import (
	"fmt"
	"net/netip"
	"regexp"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/switchyard-proxy/switchyard/dataplane"
	"github.com/switchyard-proxy/switchyard/dataplane/dataplanetest"
	"github.com/switchyard-proxy/switchyard/dataplane/nftables"
	"github.com/switchyard-proxy/switchyard/e2e/dataplane/dptest"
	"github.com/switchyard-proxy/switchyard/e2e/testbed/netns"
)

// other is the service each drift leaves alone, beside vip's "web".
var other = netip.MustParseAddrPort("10.96.0.11:80")

// foreignTable is another program's table: a base chain dropping one
// address, which no check may report and no repair may touch.
const foreignTable = `table ip someone {
	chain input {
		type filter hook input priority 10; policy accept;
		ip saddr 192.0.2.1 counter drop
	}
}
`

// TestDriftDetectedAndRepaired: issue 20's drifts, each on a fresh bed
// with two services and a foreign table: CheckDrift reports what changed
// by kind (the foreign table never), a full Apply repairs it, both
// services answer, the foreign table is still there, and checks go
// quiet again (one read-back confirms the repair, the next is the
// generation alone).
func TestDriftDetectedAndRepaired(t *testing.T) {
	cases := []struct {
		name string
		// drift runs in the node namespace; it returns the kinds the
		// check must report and whether "other" is untouched (its
		// traffic must keep working through the drift).
		drift func(t *testing.T, b *bed) (map[string]int, bool)
	}{
		{"flush the table", func(t *testing.T, b *bed) (map[string]int, bool) {
			// Chains holding a rule: a body with more than a base
			// chain's "type … hook …" line.
			typeLine, withRules := regexp.MustCompile(`(?m)^type .*$`), 0
			for name, body := range blocksOf(b.listTable(t)) {
				if strings.HasPrefix(name, "chain ") && strings.TrimSpace(typeLine.ReplaceAllString(body, "")) != "" {
					withRules++
				}
			}
			b.nft(t, "flush table ip switchyard")
			return map[string]int{dataplane.DriftRule: withRules}, false
		}},
		{"delete a chain, unhooked first", func(t *testing.T, b *bed) (map[string]int, bool) {
			svc := b.chainOf(t, vip)
			b.nft(t, fmt.Sprintf("delete element ip switchyard service-ips { %s . tcp . %d }", vip.Addr(), vip.Port()),
				"flush chain ip switchyard "+svc, "delete chain ip switchyard "+svc)
			return map[string]int{dataplane.DriftChain: 1, dataplane.DriftElement: 1}, true
		}},
		{"delete a map element", func(t *testing.T, b *bed) (map[string]int, bool) {
			b.nft(t, fmt.Sprintf("delete element ip switchyard service-ips { %s . tcp . %d }", vip.Addr(), vip.Port()))
			return map[string]int{dataplane.DriftElement: 1}, true
		}},
		{"add a foreign rule", func(t *testing.T, b *bed) (map[string]int, bool) {
			b.nft(t, "add rule ip someone input ip saddr 192.0.2.2 counter drop")
			return map[string]int{}, true
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) { driftAndRepair(t, tc.drift) })
	}
}

// driftAndRepair runs one case of TestDriftDetectedAndRepaired.
func driftAndRepair(t *testing.T, drift func(*testing.T, *bed) (map[string]int, bool)) {
	b := newBed(t)
	b.dp = b.newDP(t, nftables.Config{PartialNetlink: nsNetlink(b.Topo, b.Node.NS)})
	st := dptest.State(b.Node,
		twoPort(dptest.Service("web", vip.Addr().String(), uint32(vip.Port()), 0, b.Pods...)),
		twoPort(dptest.Service("other", other.Addr().String(), uint32(other.Port()), 0, b.Pods...)))
	b.apply(t, st)
	if dr := b.check(t); dr.Drifted() || !dr.ReadBack {
		t.Fatalf("first check: %+v", dr)
	}
	if _, err := b.Topo.ExecInput(t.Context(), b.Node.NS, strings.NewReader(foreignTable), "nft", "-f", "-"); err != nil {
		t.Fatal(err)
	}
	if dr := b.check(t); dr.Drifted() || !dr.ReadBack {
		t.Fatalf("a foreign table: %+v, want a read-back finding nothing", dr)
	}
	if dr := b.check(t); dr.ReadBack {
		t.Fatalf("nothing changed, yet the check read back: %+v", dr)
	}
	want, otherUntouched := drift(t, b)
	dr := b.check(t)
	if len(want) == 0 {
		want = nil
	}
	if d := cmp.Diff(want, dr.Kinds); d != "" || !dr.ReadBack {
		t.Errorf("drift (-want +got):\n%s%+v", d, dr)
	}
	t.Logf("found: %q", dr.Detail)
	if otherUntouched {
		b.CheckAnswered(t, b.Node.NS, other, 20, "the untouched service, before the repair")
	}
	if err := b.dp.Apply(t.Context(), st, dataplane.ApplyOptions{Full: true}); err != nil {
		t.Fatalf("repair: %v", err)
	}
	if dr := b.check(t); dr.Drifted() {
		t.Errorf("after the repair: %+v", dr)
	}
	if dr := b.check(t); dr.ReadBack || dr.Drifted() {
		t.Errorf("second check after the repair: %+v", dr)
	}
	b.CheckAnsweredBy(t, b.Topo.Client().NS, vip, 30, len(b.Pods), "web after the repair")
	b.CheckAnsweredBy(t, b.Topo.Client().NS, other, 30, len(b.Pods), "other after the repair")
	out, err := b.Topo.Exec(t.Context(), b.Node.NS, "nft", "list", "table", "ip", "someone")
	if err != nil || !strings.Contains(string(out), "ip saddr 192.0.2.1 counter") {
		t.Errorf("the foreign table changed: %s %v", out, err)
	}
}

func (b *bed) check(t *testing.T) dataplane.Drift {
	t.Helper()
	dr, err := b.dp.CheckDrift(t.Context())
	if err != nil {
		t.Fatalf("CheckDrift: %v", err)
	}
	return dr
}

// nft runs nft commands in the node namespace, as a user at a shell.
func (b *bed) nft(t *testing.T, cmds ...string) {
	t.Helper()
	for _, c := range cmds {
		if out, err := b.Topo.Exec(t.Context(), b.Node.NS, append([]string{"nft"}, strings.Fields(c)...)...); err != nil {
			t.Fatalf("nft %s: %v\n%s", c, err, out)
		}
	}
}

// chainOf returns the chain service-ips sends addr to.
func (b *bed) chainOf(t *testing.T, addr netip.AddrPort) string {
	t.Helper()
	out, err := b.Topo.Exec(t.Context(), b.Node.NS, "nft", "list", "map", "ip", nftables.DefaultTable, "service-ips")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(regexp.QuoteMeta(fmt.Sprintf("%s . tcp . %d : goto ", addr.Addr(), addr.Port())) + `(\S+?),?\s`).FindStringSubmatch(string(out))
	if m == nil {
		t.Fatalf("no element for %s in:\n%s", addr, out)
	}
	return m[1]
}

// TestDriftNoFalseReports walks every golden input in one namespace
// (both families; partial syncs over netlink where they translate,
// through nft otherwise), then a full resync of each: every check after
// one of our Applies finds the generation it expects (no read-back), and
// a read-back forced by a foreign commit finds nothing, whatever layout
// nft and the kernel gave the interval sets and maps.
func TestDriftNoFalseReports(t *testing.T) {
	topo := netns.New(t, netns.Spec{Nodes: 1})
	ns := topo.Node(0).NS
	dp, err := nftables.New(nftables.Config{Runner: dptest.NewRunner(topo, ns, runnerOptions),
		Families: []dataplane.Family{dataplane.IPv4, dataplane.IPv6}, PartialNetlink: nsNetlink(topo, ns), Logger: netns.TestLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	check := func(t *testing.T, wantReadBack bool) {
		t.Helper()
		dr, err := dp.CheckDrift(t.Context())
		if err != nil || dr.Drifted() || dr.ReadBack != wantReadBack {
			t.Fatalf("CheckDrift: %+v, %v; want no drift, read-back %v", dr, err, wantReadBack)
		}
	}
	foreign := 0
	forceReadBack := func(t *testing.T) {
		t.Helper()
		foreign++
		if _, err := topo.Exec(t.Context(), ns, "nft", "add", "table", "ip", fmt.Sprintf("someone%d", foreign)); err != nil {
			t.Fatal(err)
		}
		check(t, true)
	}
	first := true // the first Apply of a process has no baseline yet
	for _, full := range []bool{false, true} {
		for _, name := range dataplanetest.Views() {
			t.Run(fmt.Sprintf("%s/full=%v", name, full), func(t *testing.T) {
				if err := dp.Apply(t.Context(), dataplanetest.LoadState(t, name), dataplane.ApplyOptions{Full: full}); err != nil {
					t.Fatal(err)
				}
				t.Logf("%+v", dp.LastSync())
				check(t, first)
				first = false
				forceReadBack(t)
				check(t, false)
			})
		}
	}
}
