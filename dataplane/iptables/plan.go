package iptables

import (
	"fmt"
	"sort"
	"strings"
)

// kernelView is the part of iptables-save a full sync needs: owned chains
// present and jumps present in built-in chains (table/chain/target).
type kernelView struct {
	owned map[string]map[string][]string // table → owned chain → rules
	jumps map[string]bool
}

func readKernel(saved map[string]*SavedTable) kernelView {
	kv := kernelView{owned: map[string]map[string][]string{}, jumps: map[string]bool{}}
	for t, st := range saved {
		kv.owned[t] = map[string][]string{}
		for _, c := range st.chains {
			if IsOwnedChain(c) {
				kv.owned[t][c] = st.rules[c]
			}
		}
		for c, rules := range st.rules {
			for _, r := range rules {
				if tgt := RuleTarget(r); IsOwnedChain(tgt) && !IsOwnedChain(c) {
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
}

// planPartial diffs rs against prev, the ruleset applied last. Rules of
// services the render memo reused are the very same slices, so comparing
// them costs a pointer check. Chains named in always are written even
// when unchanged (kube-proxy's behaviour for its top-level chains, kept
// for comparison).
func planPartial(prev, rs *Ruleset, always map[string]bool) syncPlan {
	p := syncPlan{write: map[string][]string{}, remove: map[string][]string{}}
	for t, chains := range rs.Chains {
		for n, c := range chains {
			if old, ok := prev.Chains[t][n]; !ok || !sameRules(old.Rules, c.Rules) || always[n] {
				p.write[t] = append(p.write[t], n)
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
// whose rules differ or that is missing (every chain when rewriteAll),
// deletes owned chains the kernel holds but rs does not, and inserts
// missing jumps.
func planFull(kv kernelView, rs *Ruleset, rewriteAll bool) syncPlan {
	p := syncPlan{write: map[string][]string{}, remove: map[string][]string{}}
	for t, chains := range rs.Chains {
		for n, c := range chains {
			if got, ok := kv.owned[t][n]; ok && !rewriteAll && SameRules(got, c.Rules) {
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

// payloads renders the plan as iptables-restore --noflush inputs. Chains
// are written leaves first, in batches of at most maxChains declared
// chains (0: one batch), so every batch only jumps to chains that already
// exist; deletions and jumps come in the last batch. With one batch the
// whole change is atomic per table.
func (p *syncPlan) payloads(rs *Ruleset, maxChains int) []string {
	type item struct {
		table, name string
		level       int
	}
	var items []item
	for _, t := range rs.Tables() {
		for _, n := range p.write[t] {
			items = append(items, item{t, n, 0})
		}
	}
	if maxChains <= 0 || len(items) <= maxChains {
		// One restore declares every chain first: order does not matter.
		maxChains = len(items) + 1
	} else {
		lv := map[string]map[string]int{}
		for _, t := range rs.Tables() {
			lv[t] = levels(rs, t, p.write[t])
		}
		for i := range items {
			items[i].level = lv[items[i].table][items[i].name]
		}
		sort.SliceStable(items, func(i, j int) bool { return items[i].level < items[j].level })
	}
	var out []string
	for start := 0; start < len(items) || start == 0; start += maxChains {
		end := min(start+maxChains, len(items))
		byTable := map[string][]string{}
		for _, it := range items[start:end] {
			byTable[it.table] = append(byTable[it.table], it.name)
		}
		last := end >= len(items)
		var b strings.Builder
		for _, t := range rs.Tables() {
			var rm []string
			var jumps []Jump
			if last {
				rm = p.remove[t]
				for _, j := range p.jumps {
					if j.Table == t {
						jumps = append(jumps, j)
					}
				}
			}
			writeTable(&b, rs, t, byTable[t], rm, jumps)
		}
		if b.Len() > 0 {
			out = append(out, b.String())
		}
		if last {
			break
		}
	}
	return out
}

func writeTable(b *strings.Builder, rs *Ruleset, t string, write, remove []string, jumps []Jump) {
	if len(write)+len(remove)+len(jumps) == 0 {
		return
	}
	fmt.Fprintf(b, "*%s\n", t)
	for _, n := range write {
		fmt.Fprintf(b, ":%s - [0:0]\n", n)
	}
	for _, n := range remove {
		fmt.Fprintf(b, ":%s - [0:0]\n", n)
	}
	for _, n := range write {
		for _, r := range rs.Chains[t][n].Rules {
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
			if tgt := RuleTarget(r); tgt != "" && !builtinTargets[tgt] {
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
