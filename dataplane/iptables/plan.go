package iptables

import (
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"

	"github.com/switchyard-proxy/switchyard/dataplane/xtables"
)

// kernelView is the part of iptables-save a full sync needs: owned chains
// present and this mode's jumps present in built-in chains
// (table/chain/target); kube-proxy's jumps to the same chains are not
// this mode's (xtables.IsOwnJump).
type kernelView struct {
	owned map[string]map[string][]string // table → owned chain → rules
	jumps map[string]bool
}

func readKernel(saved map[string]*xtables.SavedTable) kernelView {
	kv := kernelView{owned: map[string]map[string][]string{}, jumps: map[string]bool{}}
	for t, st := range saved {
		kv.owned[t] = map[string][]string{}
		for _, c := range st.Chains() {
			if IsOwnedChain(c) {
				kv.owned[t][c] = st.Rules(c)
			}
		}
		for c, rules := range st.AllRules() {
			for _, r := range rules {
				if tgt := xtables.RuleTarget(r); IsOwnedChain(tgt) && !IsOwnedChain(c) && xtables.IsOwnJump(r) {
					kv.jumps[t+"/"+c+"/"+tgt] = true
				}
			}
		}
	}
	return kv
}

// syncPlan is what one sync writes.
type syncPlan struct {
	write   map[string][]string // table → chains to (re)write
	remove  map[string][]string // table → chains to delete
	jumps   []Jump              // jumps to insert
	written int                 // chains written, for metrics and tests
	// before holds, for each filter chain to write that the kernel
	// has, its rules there (read back, or as last applied): the
	// transitional step of phases keeps them until nat has changed.
	before map[string][]string
}

// planPartial diffs rs against prev, the ruleset applied last. Rules of
// services the render memo reused are the very same slices, so comparing
// them costs a pointer check.
func planPartial(prev, rs *Ruleset) syncPlan {
	p := syncPlan{write: map[string][]string{}, remove: map[string][]string{}, before: map[string][]string{}}
	for t, chains := range rs.Chains {
		for n, c := range chains {
			old, ok := prev.Chains[t][n]
			if ok && sameRules(old.Rules, c.Rules) {
				continue
			}
			p.write[t] = append(p.write[t], n)
			if ok && t == tableFilter {
				p.before[n] = old.Rules
			}
		}
	}
	for t, chains := range prev.Chains {
		for n := range chains {
			if _, ok := rs.Chains[t][n]; !ok {
				p.remove[t] = append(p.remove[t], n)
			}
		}
	}
	p.sortAll()
	return p
}

// planFull compares rs with the kernel read-back: it rewrites every chain
// whose rules differ or that is missing, deletes owned chains the kernel
// holds but rs does not, and inserts missing jumps.
func planFull(kv kernelView, rs *Ruleset) syncPlan {
	p := syncPlan{write: map[string][]string{}, remove: map[string][]string{}, before: kv.owned[tableFilter]}
	for t, chains := range rs.Chains {
		for n, c := range chains {
			if got, ok := kv.owned[t][n]; ok && xtables.SameRules(got, c.Rules) {
				continue
			}
			p.write[t] = append(p.write[t], n)
		}
	}
	for t, chains := range kv.owned {
		for n := range chains {
			if _, ok := rs.Chains[t][n]; !ok {
				p.remove[t] = append(p.remove[t], n)
			}
		}
	}
	for _, j := range rs.Jumps {
		if !kv.jumps[j.Table+"/"+j.Chain+"/"+j.Target] {
			p.jumps = append(p.jumps, j)
		}
	}
	p.sortAll()
	return p
}

func (p *syncPlan) sortAll() {
	p.written = 0
	for t := range p.write {
		sort.Strings(p.write[t])
		p.written += len(p.write[t])
	}
	for t := range p.remove {
		sort.Strings(p.remove[t])
	}
}

// empty reports whether the plan changes nothing.
func (p *syncPlan) empty() bool {
	for _, cs := range p.write {
		if len(cs) > 0 {
			return false
		}
	}
	for _, cs := range p.remove {
		if len(cs) > 0 {
			return false
		}
	}
	return len(p.jumps) == 0
}

// phase is one table's part of a sync, committed in the order
// syncPlan.phases gives (doc.go, "Commit order"): the chains it writes,
// with their rules when they are not rs's, and the chains it deletes and
// the jumps it inserts after them.
type phase struct {
	table  string
	chains []string
	rules  map[string][]string
	remove []string
	jumps  []Jump
}

// phases orders the plan's writes so that no commit leaves a service
// port that had its DNAT (nat) or its REJECT/DROP (filter) with neither:
//
//  1. filter, transitional: every written filter chain that gains a
//     rule holds the rules it had and the new ones;
//  2. nat, whole (in batches, leaves first);
//  3. filter, final: the chains whose rules still differ from rs.
//
// A REJECT on a service address never meets a packet nat DNATed (its
// destination is then the endpoint), so a REJECT that is there while the
// DNAT is too changes nothing. A sync where services only lose endpoints
// has no step 3, one where they only gain has no step 1.
func (p *syncPlan) phases(rs *Ruleset) []phase {
	early := phase{table: tableFilter, rules: map[string][]string{}}
	late := phase{table: tableFilter, remove: p.remove[tableFilter]}
	for _, n := range p.write[tableFilter] {
		want := rs.Chains[tableFilter][n].Rules
		have, exists := p.before[n]
		if !exists || gainsRules(have, want) {
			have = unionRules(have, want)
			early.chains = append(early.chains, n)
			early.rules[n] = have
			if xtables.SameRules(have, want) {
				continue
			}
		}
		late.chains = append(late.chains, n)
	}
	nat := phase{table: tableNAT, chains: p.write[tableNAT], remove: p.remove[tableNAT]}
	for _, j := range p.jumps {
		// Filter jumps with step 1, so the new REJECTs count before nat
		// changes; their targets exist by then (written in step 1 when
		// they did not).
		if j.Table == tableFilter {
			early.jumps = append(early.jumps, j)
		} else {
			nat.jumps = append(nat.jumps, j)
		}
	}
	return []phase{early, nat, late}
}

// transitional is the filter table between steps 1 and 3 of ph, as
// chain → rules for the chains the plan writes: step 1's rules, or the
// kernel's for a chain only step 3 writes. A whole-table rewrite, which
// replaces filter in one commit, writes it in step 1's place.
func (p *syncPlan) transitional(ph []phase) map[string][]string {
	out := maps.Clone(ph[0].rules)
	for _, n := range ph[2].chains {
		if _, ok := out[n]; !ok {
			out[n] = p.before[n]
		}
	}
	return out
}

// gainsRules reports whether want holds a rule have has not.
func gainsRules(have, want []string) bool {
	in := canonSet(have)
	for _, r := range want {
		if !in[xtables.CanonRule(r)] {
			return true
		}
	}
	return false
}

// unionRules is have followed by the rules of want it lacks. Filter
// rules are verdicts on disjoint service addresses, so their order does
// not matter to a packet; where old and new give one address two
// verdicts (REJECT and DROP), either is right in between.
func unionRules(have, want []string) []string {
	in := canonSet(have)
	out := slices.Clip(slices.Clone(have))
	for _, r := range want {
		if c := xtables.CanonRule(r); !in[c] {
			in[c] = true
			out = append(out, r)
		}
	}
	return out
}

func canonSet(rules []string) map[string]bool {
	in := make(map[string]bool, len(rules))
	for _, r := range rules {
		in[xtables.CanonRule(r)] = true
	}
	return in
}

// payloads renders the plan as iptables-restore --noflush inputs, its
// phases in order. With maxChains > 0 an input declares at most that
// many chains and a phase's chains are written leaves first, so every
// input only jumps to chains that already exist; a phase's deletions
// and jumps come after its last chain. An input names a table at most
// once (the transitional and final filter steps of one sync go to two
// inputs): each table block is its own commit in both flavours, and one
// table per input keeps the commit order plain.
func (p *syncPlan) payloads(rs *Ruleset, maxChains int) []string {
	return payloads(rs, p.phases(rs), maxChains)
}

func payloads(rs *Ruleset, phases []phase, maxChains int) []string {
	total := 0
	for _, ph := range phases {
		total += len(ph.chains)
	}
	batched := maxChains > 0 && total > maxChains
	var out []string
	var b strings.Builder
	named := map[string]bool{} // tables the current input holds
	declared := 0
	flush := func() {
		if b.Len() > 0 {
			out = append(out, b.String())
			b.Reset()
		}
		clear(named)
		declared = 0
	}
	for _, ph := range phases {
		chains := ph.chains
		if batched {
			chains = byLevel(rs, ph.table, chains)
		}
		for first := true; first || len(chains) > 0; first = false {
			if named[ph.table] || (batched && declared >= maxChains) {
				flush()
			}
			n := len(chains)
			if batched {
				n = min(n, maxChains-declared)
			}
			batch := chains[:n]
			chains = chains[n:]
			var rm []string
			var jumps []Jump
			if len(chains) == 0 {
				rm, jumps = ph.remove, ph.jumps
			}
			if writeTable(&b, rs, ph, batch, rm, jumps) {
				named[ph.table] = true
				declared += len(batch)
			}
		}
	}
	flush()
	return out
}

// byLevel returns the chains of table t leaves first (levels).
func byLevel(rs *Ruleset, t string, chains []string) []string {
	lv := levels(rs, t, chains)
	out := slices.Clone(chains)
	sort.SliceStable(out, func(i, j int) bool { return lv[out[i]] < lv[out[j]] })
	return out
}

// writeTable writes one table block of phase ph, if it changes anything.
func writeTable(b *strings.Builder, rs *Ruleset, ph phase, write, remove []string, jumps []Jump) bool {
	if len(write)+len(remove)+len(jumps) == 0 {
		return false
	}
	t := ph.table
	fmt.Fprintf(b, "*%s\n", t)
	for _, n := range write {
		fmt.Fprintf(b, ":%s - [0:0]\n", n)
	}
	for _, n := range remove {
		fmt.Fprintf(b, ":%s - [0:0]\n", n)
	}
	for _, n := range write {
		rules, ok := ph.rules[n]
		if !ok {
			rules = rs.Chains[t][n].Rules
		}
		for _, r := range rules {
			fmt.Fprintf(b, "-A %s %s\n", n, r)
		}
	}
	for _, n := range remove {
		fmt.Fprintf(b, "-X %s\n", n)
	}
	// Inserted in reverse so they end up in the listed order at the top.
	for i := len(jumps) - 1; i >= 0; i-- {
		fmt.Fprintf(b, "-I %s 1 %s\n", jumps[i].Chain, jumps[i].Rule)
	}
	b.WriteString("COMMIT\n")
	return true
}

// levels gives the named chains of a table (and the chains they reach)
// their height in the jump graph: 0 for chains that jump to no owned
// chain, else 1 + the highest target.
func levels(rs *Ruleset, t string, names []string) map[string]int {
	lv := map[string]int{}
	var visit func(n string, depth int) int
	visit = func(n string, depth int) int {
		if l, ok := lv[n]; ok {
			return l
		}
		c, ok := rs.Chains[t][n]
		if !ok || depth > 16 {
			return 0
		}
		l := 0
		for _, r := range c.Rules {
			if tgt := xtables.RuleTarget(r); tgt != "" && !builtinTargets[tgt] {
				l = max(l, 1+visit(tgt, depth+1))
			}
		}
		lv[n] = l
		return l
	}
	for _, n := range names {
		visit(n, 0)
	}
	return lv
}
