package iptables_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/switchyard-proxy/switchyard/dataplane"
	"github.com/switchyard-proxy/switchyard/dataplane/iptables"
	"github.com/switchyard-proxy/switchyard/dataplane/iptables/iptablestest"
	"github.com/switchyard-proxy/switchyard/dataplane/xtables"
)

func checkDrift(t *testing.T, d *iptables.Dataplane) dataplane.Drift {
	t.Helper()
	dr, err := d.CheckDrift(t.Context())
	if err != nil {
		t.Fatalf("CheckDrift: %v", err)
	}
	return dr
}

// withGeneration runs on iptables-nft with the Fake's generation.
func withGeneration(f *iptablestest.Fake) func(*iptables.Config) {
	return func(c *iptables.Config) {
		c.Flavour, c.Generation = xtables.FlavourNFT, f.Generation
	}
}

// withLegacyInfo runs on iptables-legacy with the Fake's x_tables info.
func withLegacyInfo(f *iptablestest.Fake) func(*iptables.Config) {
	return func(c *iptables.Config) { c.LegacyInfo = f.LegacyInfo }
}

// marks are the ways a check can learn that nothing changed: none
// (legacy without info: every check reads back), the nf_tables
// generation, the x_tables info.
var marks = []struct {
	name string
	with func(*iptablestest.Fake) func(*iptables.Config)
}{
	{"legacy", func(*iptablestest.Fake) func(*iptables.Config) { return func(*iptables.Config) {} }},
	{"nft+generation", withGeneration},
	{"legacy+info", withLegacyInfo},
}

// saved parses one table of a family back from the Fake.
func saved(t *testing.T, f *iptablestest.Fake, fam, table string) *xtables.SavedTable {
	t.Helper()
	out, err := f.Run(t.Context(), []string{fam + "-save", "-t", table}, nil)
	if err != nil {
		t.Fatal(err)
	}
	tables, _ := xtables.ParseSave(out)
	return tables[table]
}

// flushTable is "iptables -t TABLE -F": every chain emptied.
func flushTable(t *testing.T, f *iptablestest.Fake, fam, table string) (ownedWithRules, jumps int) {
	t.Helper()
	st := saved(t, f, fam, table)
	var b strings.Builder
	fmt.Fprintf(&b, "*%s\n", table)
	for _, c := range st.Chains() {
		fmt.Fprintf(&b, "-F %s\n", c)
	}
	b.WriteString("COMMIT\n")
	if err := f.Restore(fam, b.String()); err != nil {
		t.Fatal(err)
	}
	return iptablestest.Flushed(st, iptables.IsOwnedChain)
}

// unhookAndDelete deletes a service chain of the nat table as a user
// must: the rules jumping to it first (in its shard and its KUBE-EXT
// chain), then the chain. It returns how many chains lost a rule.
func unhookAndDelete(t *testing.T, f *iptablestest.Fake) int {
	t.Helper()
	st := saved(t, f, "iptables", "nat")
	svc := ""
	for _, c := range st.Chains() {
		if strings.HasPrefix(c, "KUBE-SVC-") {
			svc = c
			break
		}
	}
	lines, unhooked := iptablestest.Unhook(st, svc)
	restore(t, f, "*nat\n"+lines+fmt.Sprintf("-F %s\n-X %s\nCOMMIT\n", svc, svc))
	return unhooked
}

// foreignRules are another program's: a chain of its own and a jump to
// it in a built-in chain; moreForeignRules the same in nat.
const (
	foreignRules     = "*filter\n:SOMEONE - [0:0]\n-A SOMEONE -s 192.0.2.1 -j DROP\n-A INPUT -j SOMEONE\nCOMMIT\n"
	moreForeignRules = "*nat\n:SOMEONE - [0:0]\n-A SOMEONE -d 192.0.2.2 -j RETURN\n-A PREROUTING -j SOMEONE\nCOMMIT\n"
)

// TestCheckDriftFindsAndFullApplyRepairs: each change is found by kind
// on legacy (every check reads back) and on nft with the generation
// (the change commits, so the check reads back); the next Apply repairs
// it and leaves foreign rules alone.
func TestCheckDriftFindsAndFullApplyRepairs(t *testing.T) {
	cases := []struct {
		name   string
		change func(t *testing.T, f *iptablestest.Fake) map[string]int
		detail string
	}{
		{"flush the nat table", func(t *testing.T, f *iptablestest.Fake) map[string]int {
			owned, jumps := flushTable(t, f, "iptables", "nat")
			return map[string]int{dataplane.DriftRule: owned + jumps}
		}, ": 0 rules, want 2"},
		{"delete a service chain, unhooked first", func(t *testing.T, f *iptablestest.Fake) map[string]int {
			unhooked := unhookAndDelete(t, f)
			return map[string]int{dataplane.DriftChain: 1, dataplane.DriftRule: unhooked}
		}, ": missing"},
		{"delete a jump from a built-in chain", func(t *testing.T, f *iptablestest.Fake) map[string]int {
			st := saved(t, f, "iptables", "nat")
			restore(t, f, "*nat\n-D OUTPUT "+st.Rules("OUTPUT")[0]+"\nCOMMIT\n")
			return map[string]int{dataplane.DriftRule: 1}
		}, "-t nat OUTPUT: jump to KUBE-SERVICES missing"},
		{"add a rule to our chain", func(t *testing.T, f *iptablestest.Fake) map[string]int {
			restore(t, f, "*nat\n-A KUBE-SERVICES -j RETURN\nCOMMIT\n")
			return map[string]int{dataplane.DriftRule: 1}
		}, "-t nat KUBE-SERVICES"},
		{"leave a chain of our name", func(t *testing.T, f *iptablestest.Fake) map[string]int {
			restore(t, f, "*nat\n:KUBE-SVC-LEFTOVER0000000 - [0:0]\nCOMMIT\n")
			return map[string]int{dataplane.DriftChain: 1}
		}, "KUBE-SVC-LEFTOVER0000000: not in the ruleset"},
		{"add foreign rules in a foreign chain", func(t *testing.T, f *iptablestest.Fake) map[string]int {
			restore(t, f, moreForeignRules)
			return nil // and the fresh table below gets them too
		}, ""},
	}
	for _, mk := range marks {
		for _, tc := range cases {
			t.Run(mk.name+"/"+tc.name, func(t *testing.T) {
				f := iptablestest.New()
				d := newDP(t, f, mk.with(f))
				st := state(20)
				apply(t, d, st, false)
				if dr := checkDrift(t, d); dr.Drifted() || !dr.ReadBack {
					t.Fatalf("first check: %+v", dr)
				}
				restore(t, f, foreignRules) // a foreign rule throughout
				if dr := checkDrift(t, d); dr.Drifted() {
					t.Fatalf("foreign rules reported: %+v", dr)
				}
				want := tc.change(t, f)
				dr := checkDrift(t, d)
				if d := cmp.Diff(want, dr.Kinds); d != "" || !dr.ReadBack {
					t.Errorf("drift (-want +got):\n%s%+v", d, dr)
				}
				if !strings.Contains(strings.Join(dr.Detail, "\n"), tc.detail) {
					t.Errorf("detail %q lacks %q", dr.Detail, tc.detail)
				}
				apply(t, d, st, true)
				if dr := checkDrift(t, d); dr.Drifted() {
					t.Errorf("after the repair: %+v", dr)
				}
				fresh, _ := applied(t, st)
				restore(t, fresh, foreignRules)
				if want == nil {
					restore(t, fresh, moreForeignRules)
				}
				if d := cmp.Diff(fresh.Dump(), f.Dump()); d != "" {
					t.Errorf("not repaired (-fresh +got):\n%s", d)
				}
			})
		}
	}
}

func restore(t *testing.T, f *iptablestest.Fake, input string) {
	t.Helper()
	if err := f.Restore("iptables", input); err != nil {
		t.Fatal(err)
	}
}

// TestCheckDriftHairpinSet: the set is read back with the tables.
func TestCheckDriftHairpinSet(t *testing.T) {
	st := state(5)
	f, d := applied(t, st)
	m := f.SetMembers("KUBE-SWYD-HAIRPIN")[0]
	if _, err := f.Run(t.Context(), []string{"ipset", "restore"}, []byte("del KUBE-SWYD-HAIRPIN "+m+"\n")); err != nil {
		t.Fatal(err)
	}
	dr := checkDrift(t, d)
	if d := cmp.Diff(map[string]int{dataplane.DriftElement: 1}, dr.Kinds); d != "" {
		t.Fatalf("(-want +got):\n%s", d)
	}
	apply(t, d, st, false) // the next Apply is full after a drift
	if !slices.Contains(f.SetMembers("KUBE-SWYD-HAIRPIN"), m) {
		t.Errorf("member %s not restored", m)
	}
	if dr := checkDrift(t, d); dr.Drifted() {
		t.Errorf("after the repair: %+v", dr)
	}
}

// TestCheckDriftReadsBack: with a mark (the generation on nft, the
// x_tables info on legacy) only a change someone else made makes a
// check read back (our restores move the baseline; on nft one
// transaction per non-empty table block); without one every check runs
// iptables-save.
func TestCheckDriftReadsBack(t *testing.T) {
	for _, mk := range marks[1:] {
		t.Run(mk.name, func(t *testing.T) {
			f := iptablestest.New()
			d := newDP(t, f, mk.with(f))
			apply(t, d, state(20), false)
			checkDrift(t, d) // the first check reads back
			for _, step := range []struct {
				name     string
				do       func()
				readBack bool
			}{
				{"partial sync", func() { apply(t, d, state(21), false) }, false},
				{"full sync", func() { apply(t, d, state(21), true) }, false},
				{"no-op", func() { apply(t, d, state(21), false) }, false},
				{"foreign commit", func() { restore(t, f, foreignRules) }, true},
				{"foreign commit, then ours", func() {
					restore(t, f, "*filter\n-A SOMEONE -j RETURN\nCOMMIT\n")
					apply(t, d, state(19), false)
				}, true},
			} {
				f.ResetCalls()
				step.do()
				before := saves(f)
				if dr := checkDrift(t, d); dr.ReadBack != step.readBack || dr.Drifted() {
					t.Errorf("%s: %+v, want read-back %v", step.name, dr, step.readBack)
				}
				if got := saves(f) - before; step.readBack != (got == 2) || !step.readBack && got != 0 {
					t.Errorf("%s: %d iptables-save runs", step.name, got)
				}
				if dr := checkDrift(t, d); dr.ReadBack {
					t.Errorf("%s: the next check read back", step.name)
				}
			}
		})
	}
	t.Run("legacy", func(t *testing.T) {
		f, d := applied(t, state(20))
		for range 2 {
			f.ResetCalls()
			if dr := checkDrift(t, d); !dr.ReadBack || dr.Drifted() {
				t.Errorf("%+v", dr)
			}
			if got := saves(f); got != 2 {
				t.Errorf("%d iptables-save runs, want one per family", got)
			}
		}
	})
	t.Run("before any Apply", func(t *testing.T) {
		f := iptablestest.New()
		d := newDP(t, f, withGeneration(f))
		if dr, err := d.CheckDrift(context.Background()); err != nil || dr.ReadBack || len(f.Calls()) != 0 {
			t.Errorf("%+v %v %v", dr, err, f.Calls())
		}
	})
}

// saves counts the iptables-save runs the Fake has seen.
func saves(f *iptablestest.Fake) int {
	n := 0
	for _, c := range f.Calls() {
		if strings.HasSuffix(c.Argv[0], "-save") {
			n++
		}
	}
	return n
}
