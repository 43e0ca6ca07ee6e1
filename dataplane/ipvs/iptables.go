package ipvs

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/switchyard-proxy/switchyard/dataplane"
	"github.com/switchyard-proxy/switchyard/dataplane/internal/sorted"
	"github.com/switchyard-proxy/switchyard/dataplane/xtables"
)

// The fixed rules are written with iptables-restore --noflush and read back
// with iptables-save: only our chains and the jumps to them are touched.

// savedTables is an iptables-save read-back by table, parsed by
// xtables.ParseSave as the iptables mode parses its own.
type savedTables map[string]*xtables.SavedTable

func (d *Dataplane) saveRules(ctx context.Context, fam dataplane.Family) (savedTables, error) {
	out, err := d.cfg.Runner.Run(ctx, []string{d.flavour.SaveCmd(fam)}, nil)
	if err != nil {
		return nil, fmt.Errorf("%s read back: %w", fam, err)
	}
	// opaque (a table iptables-nft-save cannot print, a line of unknown
	// syntax) is no hazard here: this mode never writes a table whole,
	// only its own chains and the jumps to them, with --noflush.
	st, _ := xtables.ParseSave(out)
	return st, nil
}

// ours extracts our chains and jumps from a read-back.
func (st savedTables) ours() ruleset {
	rs := newRuleset()
	for t, tab := range st {
		if rs.chains[t] == nil {
			rs.chains[t] = map[string][]string{}
		}
		for _, c := range tab.Chains() {
			if isOwnedChain(c) {
				rs.chains[t][c] = tab.Rules(c)
				continue
			}
			for _, r := range tab.Rules(c) {
				if tgt := xtables.RuleTarget(r); isOwnedChain(tgt) {
					rs.jumps[jump{table: t, chain: c, target: tgt}.key()] = true
				}
			}
		}
	}
	return rs
}

// rulesPayload returns the iptables-restore --noflush input that makes
// have into want: changed or missing chains rewritten whole, unwanted
// ones of ours deleted, missing jumps inserted at the top. "" when equal.
func rulesPayload(have, want ruleset) string {
	var b strings.Builder
	for _, t := range []string{"filter", "nat"} {
		var write, remove []string
		for _, c := range sorted.Keys(want.chains[t]) {
			if got, ok := have.chains[t][c]; !ok || !xtables.SameRules(got, want.chains[t][c]) {
				write = append(write, c)
			}
		}
		for _, c := range sorted.Keys(have.chains[t]) {
			if _, ok := want.chains[t][c]; !ok {
				remove = append(remove, c)
			}
		}
		var jumps []jump
		for _, j := range fixedJumps {
			if j.table == t && want.jumps[j.key()] && !have.jumps[j.key()] {
				jumps = append(jumps, j)
			}
		}
		if len(write)+len(remove)+len(jumps) == 0 {
			continue
		}
		fmt.Fprintf(&b, "*%s\n", t)
		for _, c := range append(slices.Clone(write), remove...) {
			fmt.Fprintf(&b, ":%s - [0:0]\n", c)
		}
		for _, c := range write {
			for _, r := range want.chains[t][c] {
				fmt.Fprintf(&b, "-A %s %s\n", c, r)
			}
		}
		for _, c := range remove {
			fmt.Fprintf(&b, "-X %s\n", c)
		}
		for _, j := range jumps {
			fmt.Fprintf(&b, "-I %s 1 %s\n", j.chain, j.rule)
		}
		b.WriteString("COMMIT\n")
	}
	return b.String()
}

// cleanupRulesPayload removes every jump to our chains, then the chains.
// Only this mode names them, so every jump to one is ours.
func cleanupRulesPayload(st savedTables) string {
	return xtables.CleanupPayload(st, xtables.Ownership{Chain: isOwnedChain, Exclusive: isOwnedChain, Sets: isOwnedSet}).Payload
}

func (d *Dataplane) restoreRules(ctx context.Context, fam dataplane.Family, payload string) error {
	if payload == "" {
		return nil
	}
	argv := []string{d.flavour.RestoreCmd(fam), "-w", "--noflush"}
	if _, err := d.cfg.Runner.Run(ctx, argv, []byte(payload)); err != nil {
		return fmt.Errorf("%s restore: %w", fam, err)
	}
	d.stats.Restores++
	return nil
}

func cloneRuleset(rs ruleset) ruleset {
	c := newRuleset()
	for t, chains := range rs.chains {
		c.chains[t] = map[string][]string{}
		for n, rules := range chains {
			c.chains[t][n] = slices.Clone(rules)
		}
	}
	for j := range rs.jumps {
		c.jumps[j] = true
	}
	return c
}
