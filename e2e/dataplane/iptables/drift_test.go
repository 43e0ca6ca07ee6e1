package iptables

import (
	"fmt"
	"maps"
	"net/netip"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/mdlayher/netlink"

	"github.com/switchyard-proxy/switchyard/dataplane"
	"github.com/switchyard-proxy/switchyard/dataplane/iptables"
	"github.com/switchyard-proxy/switchyard/dataplane/iptables/iptablestest"
	"github.com/switchyard-proxy/switchyard/dataplane/nftgen"
	"github.com/switchyard-proxy/switchyard/dataplane/xtables"
	"github.com/switchyard-proxy/switchyard/dataplane/xtinfo"
	"github.com/switchyard-proxy/switchyard/e2e/dataplane/dptest"
	"github.com/switchyard-proxy/switchyard/e2e/testbed/netns"
)

// other is the service a drift of one service's chain leaves alone.
var other = netip.MustParseAddrPort("10.96.0.11:80")

// generation reads the nf_tables generation of the node namespace over
// a socket created on a thread inside it.
func (b *bed) generation() func() (*netlink.Conn, error) {
	return func() (*netlink.Conn, error) {
		var c *netlink.Conn
		err := b.Topo.Do(b.Node.NS, func() (err error) {
			c, err = nftgen.DialOwnNamespace()
			return err
		})
		return c, err
	}
}

// legacyInfo reads x_tables info over raw sockets created on a thread
// inside the node namespace.
func (b *bed) legacyInfo() xtinfo.Dialer {
	return func(family int) (int, error) {
		fd := -1
		err := b.Topo.Do(b.Node.NS, func() (err error) {
			fd, err = xtinfo.DialOwnNamespace(family)
			return err
		})
		return fd, err
	}
}

// driftDP is a Dataplane of flavour fl that checks drift as the agent
// does: both marks are given, the flavour uses its own.
func (b *bed) driftDP(t *testing.T, fl xtables.Flavour) *iptables.Dataplane {
	t.Helper()
	gen, info := nftgen.NewReader(b.generation()), xtinfo.NewReader(b.legacyInfo())
	t.Cleanup(func() { _, _ = gen.Close(), info.Close() })
	return b.newDP(t, iptables.Config{Flavour: fl, Generation: gen.Generation, LegacyInfo: info.Info, Logger: netns.TestLogger(t)})
}

// sh runs iptables commands of flavour fl in the node namespace, as a
// user at a shell would ("iptables" there is iptables-<fl>).
func (b *bed) sh(t *testing.T, fl xtables.Flavour, script string) {
	t.Helper()
	script = strings.NewReplacer("iptables-save", "iptables-"+string(fl)+"-save",
		"iptables-restore", "iptables-"+string(fl)+"-restore", "iptables ", "iptables-"+string(fl)+" ").Replace(script)
	if out, err := b.Topo.Exec(t.Context(), b.Node.NS, "sh", "-c", "set -e\n"+script); err != nil {
		t.Fatalf("%s: %v\n%s", script, err, out)
	}
}

func (b *bed) natSave(t *testing.T, fl xtables.Flavour) *xtables.SavedTable {
	t.Helper()
	out, err := b.Topo.Exec(t.Context(), b.Node.NS, "iptables-"+string(fl)+"-save", "-t", "nat")
	if err != nil {
		t.Fatal(err)
	}
	tables, _ := xtables.ParseSave(out)
	return tables["nat"]
}

// foreignRules are another program's: its own chain in filter, jumped
// to from INPUT.
const foreignRules = "iptables -t filter -N SOMEONE\niptables -t filter -A SOMEONE -s 192.0.2.1 -j DROP\niptables -t filter -A INPUT -j SOMEONE\n"

// TestDriftDetectedAndRepaired: issue 20's drifts on both flavours
// (nft reads the generation first, legacy the x_tables info):
// CheckDrift reports each by kind and never the foreign rules, a full
// Apply repairs it, both services answer and the foreign rules stay.
func TestDriftDetectedAndRepaired(t *testing.T) {
	cases := []struct {
		name  string
		drift func(t *testing.T, b *bed, fl xtables.Flavour) (map[string]int, bool)
	}{
		{"flush the nat table", func(t *testing.T, b *bed, fl xtables.Flavour) (map[string]int, bool) {
			owned, jumps := iptablestest.Flushed(b.natSave(t, fl), iptables.IsOwnedChain)
			b.sh(t, fl, "iptables -t nat -F")
			return map[string]int{dataplane.DriftRule: owned + jumps}, false
		}},
		{"delete a chain, unhooked first", func(t *testing.T, b *bed, fl xtables.Flavour) (map[string]int, bool) {
			nat := b.natSave(t, fl)
			svc := ""
			for _, c := range nat.Chains() {
				for _, r := range nat.Rules(c) {
					if tg := xtables.RuleTarget(r); strings.HasPrefix(c, "KUBE-SHARD-") && strings.Contains(r, "-d "+vip.Addr().String()+"/32") {
						svc = tg
					}
				}
			}
			lines, unhooked := iptablestest.Unhook(nat, svc)
			script := "iptables-restore --noflush <<EOF\n*nat\n" + lines +
				fmt.Sprintf("COMMIT\nEOF\niptables -t nat -F %s\niptables -t nat -X %s\n", svc, svc)
			b.sh(t, fl, script)
			return map[string]int{dataplane.DriftChain: 1, dataplane.DriftRule: unhooked}, true
		}},
		{"add a foreign rule", func(t *testing.T, b *bed, fl xtables.Flavour) (map[string]int, bool) {
			b.sh(t, fl, "iptables -t nat -N SOMEONE\niptables -t nat -A SOMEONE -d 192.0.2.2 -j RETURN\niptables -t nat -A PREROUTING -j SOMEONE\n")
			return nil, true
		}},
	}
	for _, fl := range flavours {
		for _, tc := range cases {
			t.Run(string(fl)+"/"+tc.name, func(t *testing.T) { driftAndRepair(t, fl, tc.drift) })
		}
	}
}

// driftAndRepair runs one case of TestDriftDetectedAndRepaired.
func driftAndRepair(t *testing.T, fl xtables.Flavour, drift func(*testing.T, *bed, xtables.Flavour) (map[string]int, bool)) {
	b := newBed(t)
	dp := b.driftDP(t, fl)
	st := dptest.State(b.Node,
		dptest.Service("web", vip.Addr().String(), uint32(vip.Port()), 0, b.Pods...),
		dptest.Service("other", other.Addr().String(), uint32(other.Port()), 0, b.Pods...))
	check := func(t *testing.T) dataplane.Drift {
		t.Helper()
		dr, err := dp.CheckDrift(t.Context())
		if err != nil {
			t.Fatalf("CheckDrift: %v", err)
		}
		return dr
	}
	if err := dp.Apply(t.Context(), st, dataplane.ApplyOptions{}); err != nil {
		t.Fatal(err)
	}
	if dr := check(t); dr.Drifted() || !dr.ReadBack {
		t.Fatalf("first check: %+v", dr)
	}
	b.sh(t, fl, foreignRules)
	if dr := check(t); dr.Drifted() || !dr.ReadBack {
		t.Fatalf("foreign rules: %+v, want a read-back finding nothing", dr)
	}
	if dr := check(t); dr.ReadBack {
		t.Fatalf("nothing changed: %+v", dr)
	}
	want, otherUntouched := drift(t, b, fl)
	dr := check(t)
	if d := cmp.Diff(want, dr.Kinds); d != "" || !dr.ReadBack {
		t.Errorf("drift (-want +got):\n%s%+v", d, dr)
	}
	t.Logf("found: %q", dr.Detail)
	if otherUntouched {
		b.CheckAnswered(t, b.Node.NS, other, 20, "the untouched service, before the repair")
	}
	if err := dp.Apply(t.Context(), st, dataplane.ApplyOptions{Full: true}); err != nil {
		t.Fatalf("repair: %v", err)
	}
	if dr := check(t); dr.Drifted() {
		t.Errorf("after the repair: %+v", dr)
	}
	b.CheckAnsweredBy(t, b.Topo.Client().NS, vip, 30, len(b.Pods), "web after the repair")
	b.CheckAnsweredBy(t, b.Topo.Client().NS, other, 30, len(b.Pods), "other after the repair")
	out, err := b.Topo.Exec(t.Context(), b.Node.NS, "iptables-"+string(fl)+"-save", "-t", "filter")
	if err != nil || !strings.Contains(string(out), "-A SOMEONE -s 192.0.2.1/32 -j DROP") || !strings.Contains(string(out), "-A INPUT -j SOMEONE") {
		t.Errorf("foreign rules changed: %v\n%s", err, out)
	}
}

// TestDriftNoFalseReports: every rule form, in both families and on
// both flavours, reads back as applied, and our own syncs move the
// baseline (no read-back after them).
func TestDriftNoFalseReports(t *testing.T) {
	forFamiliesAndFlavours(t, func(t *testing.T, b *bed, fl xtables.Flavour) {
		dp := b.driftDP(t, fl)
		st := b.RuleFormState()
		for i, full := range []bool{false, false, true} {
			if i == 1 { // a partial change: one service fewer
				for name := range st.Services {
					st = &dataplane.State{Config: st.Config, Services: maps.Clone(st.Services)}
					delete(st.Services, name)
					break
				}
			}
			if err := dp.Apply(t.Context(), st, dataplane.ApplyOptions{Full: full}); err != nil {
				t.Fatal(err)
			}
			dr, err := dp.CheckDrift(t.Context())
			wantReadBack := i == 0
			if err != nil || dr.Drifted() || dr.ReadBack != wantReadBack {
				t.Fatalf("sync %d: %+v %v, want no drift, read-back %v", i, dr, err, wantReadBack)
			}
		}
	})
}
