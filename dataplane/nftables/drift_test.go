package nftables

import (
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"sigs.k8s.io/knftables"

	"github.com/switchyard-proxy/switchyard/dataplane"
	"github.com/switchyard-proxy/switchyard/dataplane/dataplanetest"
	switchyardv1 "github.com/switchyard-proxy/switchyard/proto/switchyard/v1"
)

// driftState is five services, the last with ClientIP affinity (so the
// table holds endpoint chains and a dynamic set).
func driftState() *dataplane.State {
	svcs := manyServices(5)
	svcs[4].SessionAffinity = switchyardv1.SessionAffinity_SESSION_AFFINITY_CLIENT_IP
	svcs[4].SessionAffinityTimeoutSeconds = 60
	return stateOf(svcs...)
}

func check(t testing.TB, dp *Dataplane) dataplane.Drift {
	t.Helper()
	dr, err := dp.CheckDrift(t.Context())
	if err != nil {
		t.Fatalf("CheckDrift: %v", err)
	}
	return dr
}

// settled applies st and checks once, so the next check starts from a
// known generation.
func settled(t testing.TB, b *fakeBed, st *dataplane.State) {
	t.Helper()
	b.apply(t, st, false)
	if dr := check(t, b.dp); dr.Drifted() || !dr.ReadBack {
		t.Fatalf("first check after the first Apply: %+v, want a clean read-back", dr)
	}
	if dr := check(t, b.dp); dr.ReadBack {
		t.Fatalf("second check read back: %+v", dr)
	}
}

// TestCheckDriftFindsAndFullApplyRepairs: each change someone else makes
// to the table is found by kind and named, the next Apply (full) leaves
// the table as a fresh load, and checks then read back once to confirm
// and go quiet.
func TestCheckDriftFindsAndFullApplyRepairs(t *testing.T) {
	s1 := namesFor("ns", "s1", "http", dataplane.TCP)
	cases := []struct {
		name   string
		change func(tx *knftables.Transaction, f *knftables.Fake)
		want   map[string]int
		detail string
	}{
		{"flush table (every chain's rules)", func(tx *knftables.Transaction, f *knftables.Fake) {
			for n := range f.Table.Chains {
				tx.Flush(&knftables.Chain{Name: n})
			}
		}, map[string]int{dataplane.DriftRule: 0}, "cluster-ips-check: 0 rules, want 2"},
		{"service chain deleted, unhooked first", func(tx *knftables.Transaction, _ *knftables.Fake) {
			tx.Delete(&knftables.Element{Map: mapServiceIPs, Key: []string{"10.96.0.2", "tcp", "80"}})
			tx.Flush(&knftables.Chain{Name: s1.svc})
			tx.Delete(&knftables.Chain{Name: s1.svc})
		}, map[string]int{dataplane.DriftChain: 1, dataplane.DriftElement: 1}, s1.svc + ": missing"},
		{"base chain deleted", func(tx *knftables.Transaction, _ *knftables.Fake) {
			tx.Flush(&knftables.Chain{Name: chainNatOutput})
			tx.Delete(&knftables.Chain{Name: chainNatOutput})
		}, map[string]int{dataplane.DriftChain: 1}, "nat-output: missing"},
		{"verdict map element deleted", func(tx *knftables.Transaction, _ *knftables.Fake) {
			tx.Delete(&knftables.Element{Map: mapServiceIPs, Key: []string{"10.96.0.2", "tcp", "80"}})
		}, map[string]int{dataplane.DriftElement: 1}, "missing 10.96.0.2 . tcp . 80 : goto " + s1.svc},
		{"hairpin pair deleted", func(tx *knftables.Transaction, _ *knftables.Fake) {
			tx.Delete(&knftables.Element{Set: setHairpin, Key: []string{"10.128.0.4", "10.128.0.4"}})
		}, map[string]int{dataplane.DriftElement: 1}, "hairpin-endpoints: missing 10.128.0.4 . 10.128.0.4"},
		{"foreign element added", func(tx *knftables.Transaction, _ *knftables.Fake) {
			tx.Add(&knftables.Element{Map: mapServiceIPs, Key: []string{"10.96.9.9", "tcp", "80"}, Value: []string{"drop"}})
		}, map[string]int{dataplane.DriftElement: 1}, "service-ips: not ours 0a6009090600000000500000 : drop"},
		{"chain added to our table", func(tx *knftables.Transaction, _ *knftables.Fake) {
			tx.Add(&knftables.Chain{Name: "someone-elses"})
		}, map[string]int{dataplane.DriftChain: 1}, "someone-elses: not ours"},
		{"rule added to our chain", func(tx *knftables.Transaction, _ *knftables.Fake) {
			tx.Add(&knftables.Rule{Chain: chainServices, Rule: "drop"})
		}, map[string]int{dataplane.DriftRule: 1}, "services: 3 rules, want 2"},
		{"per-service rule changed", func(tx *knftables.Transaction, f *knftables.Fake) {
			rules := f.Table.Chains[s1.svc].Rules
			r := rules[len(rules)-1] // the dnat through the endpoint map
			tx.Replace(&knftables.Rule{Chain: s1.svc, Handle: r.Handle, Rule: strings.Replace(r.Rule, " offset ", " offset 1", 1)})
		}, map[string]int{dataplane.DriftRule: 1}, s1.svc},
		{"fixed rule sent elsewhere", func(tx *knftables.Transaction, f *knftables.Fake) {
			r := f.Table.Chains[chainNatOutput].Rules[0]
			tx.Replace(&knftables.Rule{Chain: chainNatOutput, Handle: r.Handle, Rule: "jump " + chainMasquerading})
		}, map[string]int{dataplane.DriftRule: 1}, "nat-output"},
		{"set deleted", func(tx *knftables.Transaction, _ *knftables.Fake) {
			tx.Delete(&knftables.Set{Name: setServiceCIDRs})
		}, map[string]int{dataplane.DriftSet: 1}, "service-cidrs: missing"},
		{"set added to our table", func(tx *knftables.Transaction, _ *knftables.Fake) {
			tx.Add(&knftables.Set{Name: "someone-elses", Type: "ipv4_addr"})
		}, map[string]int{dataplane.DriftSet: 1}, "someone-elses: not ours"},
		{"table deleted", func(tx *knftables.Transaction, _ *knftables.Fake) {
			tx.Delete(&knftables.Table{})
		}, map[string]int{dataplane.DriftTable: 1}, "table ip switchyard"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			findAndRepair(t, func(tx *knftables.Transaction, f *knftables.Fake) { tc.change(tx, f) }, tc.want, tc.detail)
		})
	}
}

// findAndRepair runs one case of TestCheckDriftFindsAndFullApplyRepairs;
// a want of 0 rules means every chain that has rules.
func findAndRepair(t *testing.T, change func(*knftables.Transaction, *knftables.Fake), want map[string]int, detail string) {
	b, k := newDriftBed(t)
	st := driftState()
	settled(t, b, st)
	k.foreign(t, dataplane.IPv4, func(tx *knftables.Transaction) { change(tx, b.fakes[dataplane.IPv4]) })
	dr := check(t, b.dp)
	if rules, ok := want[dataplane.DriftRule]; ok && rules == 0 {
		want[dataplane.DriftRule] = chainsWithRules(b.dp.applied[dataplane.IPv4])
	}
	if d := cmp.Diff(want, dr.Kinds); d != "" || !dr.ReadBack {
		t.Errorf("drift kinds (-want +got):\n%s\n%+v", d, dr)
	}
	if !strings.Contains(strings.Join(dr.Detail, "\n"), detail) {
		t.Errorf("detail %q lacks %q", dr.Detail, detail)
	}
	b.apply(t, st, true)
	if s := b.dp.LastSync(); !s.Full || s.Transactions != 1 {
		t.Errorf("repair: %+v", s)
	}
	if d := cmp.Diff(freshDump(t, st, dataplane.IPv4, b.dp), sortedDump(b.fakes[dataplane.IPv4])); d != "" {
		t.Errorf("not repaired (-fresh +got):\n%s", d)
	}
	if dr := check(t, b.dp); dr.Drifted() || !dr.ReadBack {
		t.Errorf("check after the repair: %+v, want a clean read-back", dr)
	}
	if dr := check(t, b.dp); dr.ReadBack {
		t.Errorf("check after that read back again: %+v", dr)
	}
}

func chainsWithRules(rs *Ruleset) int {
	n := 0
	for _, c := range rs.Chains {
		if len(c.Rules) > 0 {
			n++
		}
	}
	return n
}

// TestCheckDriftReadsBackOnlyWhenTheGenerationMoved: our own commits
// move the baseline; a foreign commit anywhere (before, between or
// after ours) makes exactly one check read back.
func TestCheckDriftReadsBackOnlyWhenTheGenerationMoved(t *testing.T) {
	b, k := newDriftBed(t)
	if dr := check(t, b.dp); dr.ReadBack || dr.Drifted() {
		t.Fatalf("check before any Apply: %+v", dr)
	}
	svcs := manyServices(5)
	settled(t, b, stateOf(svcs...))
	steps := []struct {
		name     string
		do       func()
		readBack bool
	}{
		{"partial sync of ours", func() { b.apply(t, stateOf(svcs[:4]...), false) }, false},
		{"full sync of ours", func() { b.apply(t, stateOf(svcs[:4]...), true) }, false},
		{"no-op Apply", func() { b.apply(t, stateOf(svcs[:4]...), false) }, false},
		{"foreign commit", func() { k.commit() }, true},
		{"foreign commit, then our sync", func() { k.commit(); b.apply(t, stateOf(svcs...), false) }, true},
		{"foreign commit between ours", func() {
			b.rec[dataplane.IPv4].onCommit = func() { k.commit(); k.commit() }
			defer func() { b.rec[dataplane.IPv4].onCommit = k.commit }()
			b.apply(t, stateOf(svcs[:3]...), false)
		}, true},
	}
	for _, s := range steps {
		s.do()
		reads := k.readBacks()
		if dr := check(t, b.dp); dr.ReadBack != s.readBack || dr.Drifted() {
			t.Errorf("%s: check %+v, want read-back %v and no drift", s.name, dr, s.readBack)
		}
		if got := k.readBacks() - reads; s.readBack && got != 1 || !s.readBack && got != 0 {
			t.Errorf("%s: %d read-backs", s.name, got)
		}
		if dr := check(t, b.dp); dr.ReadBack {
			t.Errorf("%s: second check read back", s.name)
		}
	}
}

// TestRepairRelearnsTheTable: a periodic full resync used to plan from
// what it applied, so a chain someone deleted that the new state drops
// too made its "flush chain" fail. After a check found the drift, the
// next Apply lists the kernel table first, and is full even when the
// caller asks for a partial one.
func TestRepairRelearnsTheTable(t *testing.T) {
	svcs := manyServices(5)
	s4 := namesFor("ns", "s4", "http", dataplane.TCP)
	drop := func(tx *knftables.Transaction) {
		tx.Delete(&knftables.Element{Map: mapServiceIPs, Key: []string{"10.96.0.5", "tcp", "80"}})
		tx.Flush(&knftables.Chain{Name: s4.svc})
		tx.Delete(&knftables.Chain{Name: s4.svc})
	}
	t.Run("without a check", func(t *testing.T) {
		b, k := newDriftBed(t)
		b.apply(t, stateOf(svcs...), false)
		k.foreign(t, dataplane.IPv4, drop)
		err := b.dp.Apply(t.Context(), stateOf(svcs[:4]...), dataplane.ApplyOptions{Full: true})
		if err == nil {
			t.Fatal("a resync that trusts what it applied flushed a chain that is gone, and did not fail: the test no longer shows why relearning is needed")
		}
	})
	t.Run("after a check", func(t *testing.T) {
		b, k := newDriftBed(t)
		settled(t, b, stateOf(svcs...))
		k.foreign(t, dataplane.IPv4, drop)
		if dr := check(t, b.dp); !dr.Drifted() {
			t.Fatal("no drift found")
		}
		st := stateOf(svcs[:4]...)
		b.apply(t, st, false)
		if s := b.dp.LastSync(); !s.Full {
			t.Errorf("the Apply after a drift was not full: %+v", s)
		}
		if d := cmp.Diff(freshDump(t, st, dataplane.IPv4, b.dp), sortedDump(b.fakes[dataplane.IPv4])); d != "" {
			t.Errorf("not repaired (-fresh +got):\n%s", d)
		}
		b.apply(t, st, false)
		if s := b.dp.LastSync(); s.Full || s.Transactions != 0 {
			t.Errorf("the Apply after the repair: %+v, want a partial no-op", s)
		}
	})
}

// TestCheckDriftPerFamily: only the family that drifted is rewritten.
func TestCheckDriftPerFamily(t *testing.T) {
	b, k := newDriftBed(t, dataplane.IPv4, dataplane.IPv6)
	st := stateOf(manyServices(3)...)
	st.Config.NodeIps = append(st.Config.NodeIps, "fd00::10")
	settled(t, b, st)
	k.foreign(t, dataplane.IPv6, func(tx *knftables.Transaction) { tx.Flush(&knftables.Chain{Name: chainNatOutput}) })
	dr := check(t, b.dp)
	if d := cmp.Diff(map[string]int{dataplane.DriftRule: 1}, dr.Kinds); d != "" {
		t.Fatalf("(-want +got):\n%s", d)
	}
	if !strings.Contains(dr.Detail[0], "ip6 switchyard nat-output") {
		t.Errorf("detail %q", dr.Detail)
	}
	b.rec[dataplane.IPv4].take()
	b.rec[dataplane.IPv6].take()
	b.apply(t, st, false)
	if n4, n6 := len(b.rec[dataplane.IPv4].take()), len(b.rec[dataplane.IPv6].take()); n4 != 0 || n6 != 1 {
		t.Errorf("transactions ip %d, ip6 %d; want 0 and 1", n4, n6)
	}
}

func TestCheckDriftUnsupportedWithoutNetlink(t *testing.T) {
	b := newFakeBed(t)
	if dr, err := b.dp.CheckDrift(t.Context()); err != nil || dr.Drifted() {
		t.Fatalf("before any Apply: %+v, %v", dr, err)
	}
	b.apply(t, stateOf(manyServices(2)...), false)
	if _, err := b.dp.CheckDrift(t.Context()); !errors.Is(err, errors.ErrUnsupported) {
		t.Fatalf("want ErrUnsupported, got %v", err)
	}
}

// TestCheckDriftGoldens: every golden input, applied, reads back as
// exactly what was applied (no false drift from the comparable forms),
// IPv4 and IPv6.
func TestCheckDriftGoldens(t *testing.T) {
	for _, name := range dataplanetest.Views() {
		t.Run(name, func(t *testing.T) {
			b, _ := newDriftBed(t, dataplane.IPv4, dataplane.IPv6)
			settled(t, b, dataplanetest.LoadState(t, name))
			if n := len(b.dp.applied); n != 2 {
				t.Fatalf("%d families applied", n)
			}
		})
	}
}
