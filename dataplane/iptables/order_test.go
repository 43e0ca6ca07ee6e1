package iptables_test

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/switchyard-proxy/switchyard/dataplane"
	"github.com/switchyard-proxy/switchyard/dataplane/iptables"
	"github.com/switchyard-proxy/switchyard/dataplane/iptables/iptablestest"
	"github.com/switchyard-proxy/switchyard/dataplane/xtables"
)

// commits runs restores on a Fake one table block at a time, as the
// kernel commits them (each COMMIT is its own transaction in both
// flavours), and keeps the tables after each commit.
type commits struct {
	*iptablestest.Fake
	tables []string // the table of each commit
	states []string // the Fake's dump after each commit
}

func (c *commits) Run(ctx context.Context, argv []string, stdin []byte) ([]byte, error) {
	if !strings.HasSuffix(argv[0], "-restore") {
		return c.Fake.Run(ctx, argv, stdin)
	}
	for block := range strings.SplitAfterSeq(string(stdin), "COMMIT\n") {
		if strings.TrimSpace(block) == "" {
			continue
		}
		if _, err := c.Fake.Run(ctx, argv, []byte(block)); err != nil {
			return nil, err
		}
		name, _, _ := strings.Cut(block[strings.Index(block, "*")+1:], "\n")
		c.tables = append(c.tables, name)
		c.states = append(c.states, c.Fake.Dump())
	}
	return nil, nil
}

func (c *commits) reset() { c.tables, c.states = nil, nil }

// verdicts reads an IPv4 dump as service port ("address:port", "*" for
// node ports) → "dnat" when nat sends it, from KUBE-SERVICES, to a chain
// that DNATs, and/or "refuse" when filter REJECTs or DROPs it.
func verdicts(dump string) map[string][]string {
	rules := map[string]map[string][]string{} // table → chain → rules
	fam, table := "", ""
	for l := range strings.SplitSeq(dump, "\n") {
		switch {
		case strings.HasPrefix(l, "# "):
			fam = l[2:]
		case strings.HasPrefix(l, "*"):
			table = l[1:]
			if rules[table] == nil {
				rules[table] = map[string][]string{}
			}
		case strings.HasPrefix(l, "-A ") && fam == "iptables":
			chain, rule, _ := strings.Cut(l[3:], " ")
			rules[table][chain] = append(rules[table][chain], rule)
		}
	}
	out := map[string][]string{}
	add := func(key, v string) {
		if !slices.Contains(out[key], v) {
			out[key] = append(out[key], v)
		}
	}
	nat := rules["nat"]
	var dnats func(chain string, depth int) bool
	dnats = func(chain string, depth int) bool {
		for _, r := range nat[chain] {
			if tgt := xtables.RuleTarget(r); tgt == "DNAT" || (depth < 4 && nat[tgt] != nil && dnats(tgt, depth+1)) {
				return true
			}
		}
		return false
	}
	var walk func(chain string, depth int)
	walk = func(chain string, depth int) {
		for _, r := range nat[chain] {
			tgt := xtables.RuleTarget(r)
			if key, ok := portKey(r); ok {
				if dnats(tgt, 0) {
					add(key, "dnat")
				}
			} else if nat[tgt] != nil && depth < 4 {
				walk(tgt, depth+1) // shards, KUBE-NODEPORTS
			}
		}
	}
	walk("KUBE-SERVICES", 0)
	for _, chain := range []string{"KUBE-SERVICES", "KUBE-EXTERNAL-SERVICES"} {
		for _, r := range rules["filter"][chain] {
			if tgt := xtables.RuleTarget(r); tgt == "REJECT" || tgt == "DROP" {
				if key, ok := portKey(r); ok {
					add(key, "refuse")
				}
			}
		}
	}
	return out
}

// portKey is the service port a rule matches: its destination (not
// negated; "*" when none) and destination port.
func portKey(rule string) (string, bool) {
	f := strings.Fields(rule)
	dst, port := "*", ""
	for i := 0; i+1 < len(f); i++ {
		switch {
		case f[i] == "-d" && (i == 0 || f[i-1] != "!"):
			dst = strings.TrimSuffix(f[i+1], "/32")
		case f[i] == "--dport":
			port = f[i+1]
		}
	}
	return dst + ":" + port, port != ""
}

// orderState has services s0… with endpoints where served[i] is set.
func orderState(served ...bool) *dataplane.State {
	st := state(0)
	for i, s := range served {
		var eps []string
		if s {
			eps = []string{fmt.Sprintf("10.244.0.%d", i+1), fmt.Sprintf("10.244.1.%d", i+1)}
		}
		st.Services[fmt.Sprintf("ns/s%d", i)] = service(i, eps...)
	}
	return st
}

// TestCommitOrderNeverLeavesAPortUnhandled: when a service gains its
// first endpoints, loses its last ones, or both happen to different
// services in one sync, every commit on the way leaves each service port
// that had rules with its DNAT or its REJECT (RELIABILITY.md, finding
// 1: filter committed before nat, and a port gaining endpoints had
// neither in between). On every sync path: partial, full (the first
// after a restart included), in batches, and the whole-table rewrite.
func TestCommitOrderNeverLeavesAPortUnhandled(t *testing.T) {
	changes := []struct {
		name          string
		before, after *dataplane.State
		// tables is the commit order of an unbatched --noflush sync.
		tables []string
	}{
		{"gain", orderState(true, false, true), orderState(true, true, true), []string{"nat", "filter"}},
		{"loss", orderState(true, true, true), orderState(true, false, true), []string{"filter", "nat"}},
		{"mixed", orderState(true, false, true, true), orderState(true, true, false, true), []string{"filter", "nat", "filter"}},
		{"mixed, many", orderState(true, false, true, false, true, false, false, true),
			orderState(false, true, false, true, true, false, true, false), []string{"filter", "nat", "filter"}},
	}
	legacy := func(c *iptables.Config) {}
	paths := []struct {
		name string
		cfg  func(*iptables.Config)
		// restart applies after with a new Dataplane over the kernel
		// before left, as a restarted agent does.
		full, restart, rewrite bool
	}{
		{name: "partial", cfg: legacy},
		{name: "full", cfg: legacy, full: true},
		{name: "after restart", cfg: legacy, restart: true},
		{name: "partial in batches", cfg: func(c *iptables.Config) { c.MaxChainsPerRestore = 1 }},
		{name: "full in batches", cfg: func(c *iptables.Config) { c.MaxChainsPerRestore = 2 }, full: true},
		{name: "table rewrite", cfg: func(c *iptables.Config) {
			c.Flavour, c.RewriteTablesAbove = xtables.FlavourNFT, 1
		}, full: true, rewrite: true},
	}
	for _, ch := range changes {
		for _, path := range paths {
			t.Run(ch.name+"/"+path.name, func(t *testing.T) {
				rec := &commits{Fake: iptablestest.New()}
				mk := func() *iptables.Dataplane {
					return newDP(t, rec.Fake, path.cfg, func(c *iptables.Config) {
						c.Runner, c.Families = rec, []dataplane.Family{dataplane.IPv4}
					})
				}
				d := mk()
				apply(t, d, ch.before, false)
				had := verdicts(rec.Dump())
				rec.reset()
				if path.restart {
					d = mk()
				}
				apply(t, d, ch.after, path.full)
				if path.rewrite && d.LastSync().TableRewrites != 1 {
					t.Fatalf("stats %+v, want a table rewrite", d.LastSync())
				}
				want := verdicts(rec.Dump())
				ports := slices.Sorted(maps.Keys(had))
				if !slices.Equal(ports, slices.Sorted(maps.Keys(want))) {
					t.Fatalf("ports before %v, after %v: the cases keep every port", had, want)
				}
				for i, s := range rec.states {
					got := verdicts(s)
					for _, p := range ports {
						if len(got[p]) == 0 {
							t.Errorf("after commit %d of %v (%s): %s has neither DNAT nor REJECT (before %v, after %v)",
								i+1, rec.tables, rec.tables[i], p, had[p], want[p])
						}
					}
				}
				if path.name == "partial" || path.name == "full" {
					if diff := cmp.Diff(ch.tables, rec.tables); diff != "" {
						t.Errorf("commit order (-want +got):\n%s", diff)
					}
				}
				// The end is what a fresh sync of after gives.
				fresh, _ := applied(t, ch.after, ipv4Only)
				if diff := cmp.Diff(tables(fresh.Dump()), tables(rec.Dump())); diff != "" {
					t.Errorf("end state differs from a fresh sync (-fresh +got):\n%s", diff)
				}
			})
		}
	}
}
