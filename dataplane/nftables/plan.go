package nftables

import (
	"reflect"
	"slices"
	"strings"

	"sigs.k8s.io/knftables"
)

// tableObjects are the names of what a kernel table holds.
type tableObjects struct {
	chains, sets, maps []string
}

// hasChains returns the set of the listed chains.
func (t tableObjects) hasChains() map[string]bool {
	chains := make(map[string]bool, len(t.chains))
	for _, n := range t.chains {
		chains[n] = true
	}
	return chains
}

// txWriter is what the planners write to: a *knftables.Transaction, or
// an opLog that also records the operations for the netlink runner.
type txWriter interface {
	Add(knftables.Object)
	Flush(knftables.Object)
	Delete(knftables.Object)
}

// op is one recorded operation of a transaction.
type op struct {
	verb string // "add", "flush", "delete"
	obj  knftables.Object
}

// opLog writes to a knftables transaction (the source of truth, and what
// nft runs) and records each operation, so a partial transaction can be
// sent over netlink instead.
type opLog struct {
	tx  *knftables.Transaction
	ops []op
}

func (l *opLog) Add(o knftables.Object)    { l.tx.Add(o); l.ops = append(l.ops, op{"add", o}) }
func (l *opLog) Flush(o knftables.Object)  { l.tx.Flush(o); l.ops = append(l.ops, op{"flush", o}) }
func (l *opLog) Delete(o knftables.Object) { l.tx.Delete(o); l.ops = append(l.ops, op{"delete", o}) }

// planStats counts what one transaction writes.
type planStats struct {
	chainsWritten, chainsRemoved int
	elementsAdded, elementsDeled int
}

func (s *planStats) add(o planStats) {
	s.chainsWritten += o.chainsWritten
	s.chainsRemoved += o.chainsRemoved
	s.elementsAdded += o.elementsAdded
	s.elementsDeled += o.elementsDeled
}

// planPartial writes into tx the difference between prev (what the last
// successful transaction left) and next: new sets, new and changed chains
// (flushed and rewritten whole), element deletions and additions, then
// removed chains (all flushed before any is deleted, since they may
// reference each other) and removed sets. Nothing that did not change is
// touched, so the transaction's size follows the change, not the table.
// Its cost nearly does too: a service the memo reused shares its chains
// and its own maps with prev, which compare by pointer, and only what
// changed is sorted.
func planPartial(tx txWriter, prev, next *Ruleset) planStats {
	var st planStats
	for _, n := range keysWhere(next.Sets, func(n string, s *Set) bool {
		old, ok := prev.Sets[n]
		return !ok || (old != s && !sameSet(old, s))
	}) {
		if old, ok := prev.Sets[n]; ok {
			// Sets cannot be altered; only their contents ever
			// change in practice (names carry the definition).
			tx.Delete(old.ref())
		}
		tx.Add(next.Sets[n].object())
	}
	write := keysWhere(next.Chains, func(n string, c *Chain) bool {
		old, ok := prev.Chains[n]
		return !ok || (old != c && !slices.Equal(old.Rules, c.Rules))
	})
	for _, n := range write {
		if _, ok := prev.Chains[n]; !ok {
			tx.Add(next.Chains[n].object())
		}
	}
	for _, n := range write {
		if _, ok := prev.Chains[n]; ok {
			tx.Flush(&knftables.Chain{Name: n})
		}
		addRules(tx, next.Chains[n])
	}
	st.chainsWritten = len(write)
	st.add(planElements(tx, prev, next))
	gone := keysWhere(prev.Chains, func(n string, _ *Chain) bool { _, ok := next.Chains[n]; return !ok })
	for _, n := range gone {
		tx.Flush(&knftables.Chain{Name: n})
	}
	for _, n := range gone {
		tx.Delete(&knftables.Chain{Name: n})
	}
	st.chainsRemoved = len(gone)
	for _, n := range keysWhere(prev.Sets, func(n string, _ *Set) bool { _, ok := next.Sets[n]; return !ok }) {
		tx.Delete(prev.Sets[n].ref())
	}
	return st
}

// keysWhere returns the keys of m for which keep holds, sorted.
func keysWhere[V any](m map[string]V, keep func(string, V) bool) []string {
	var out []string
	for k, v := range m {
		if keep(k, v) {
			out = append(out, k)
		}
	}
	slices.Sort(out)
	return out
}

// sameMap reports whether two element maps are one map: the memo shares
// an unchanged service's own maps between rulesets.
func sameMap(a, b map[string]string) bool {
	return reflect.ValueOf(a).UnsafePointer() == reflect.ValueOf(b).UnsafePointer()
}

// planElements deletes elements that went away or changed value, then
// adds new and changed ones.
func planElements(tx txWriter, prev, next *Ruleset) planStats {
	var st planStats
	for _, n := range keysWhere(prev.Elements, func(n string, m map[string]string) bool {
		s, ok := prev.Sets[n]
		if !ok || sameMap(m, next.Elements[n]) {
			return false
		}
		ns, ok := next.Sets[n]
		return ok && (ns == s || sameSet(s, ns)) // else the whole set goes or is recreated
	}) {
		old, cur := prev.Elements[n], next.Elements[n]
		for _, k := range keysWhere(old, func(k, v string) bool { nv, ok := cur[k]; return !ok || nv != v }) {
			tx.Delete(prev.Sets[n].elementObject(k, ""))
			st.elementsDeled++
		}
	}
	for _, n := range keysWhere(next.Elements, func(n string, m map[string]string) bool {
		return !sameMap(m, prev.Elements[n])
	}) {
		s := next.Sets[n]
		recreated := prev.Sets[n] == nil || (prev.Sets[n] != s && !sameSet(prev.Sets[n], s))
		old := prev.Elements[n]
		for _, k := range keysWhere(next.Elements[n], func(k, v string) bool {
			ov, ok := old[k]
			return recreated || !ok || ov != v
		}) {
			tx.Add(s.elementObject(k, next.Elements[n][k]))
			st.elementsAdded++
		}
	}
	return st
}

// planFull writes into tx the whole table: every chain is declared,
// flushed (when existing holds it) and rewritten; every static set and
// map is flushed and refilled; dynamic (affinity) sets are
// declared but keep their contents. existing names the chains and sets
// in the kernel table: those next does not have are flushed and deleted. Everything is one
// transaction, so the kernel switches from the old table to the new one
// at once and established flows keep their conntrack entries.
//
// When resetBase is set (first sync of this process), base chains are
// deleted and recreated first, so a hook or priority that changed across
// versions is applied instead of failing the add.
func planFull(tx *knftables.Transaction, next *Ruleset, existing tableObjects, resetBase bool) planStats {
	var st planStats
	tx.Add(&knftables.Table{})
	chains := sortedKeys(next.Chains)
	// Only chains that exist are flushed or reset: one the table lacks is
	// created empty by its add. A first load into an empty table is then
	// a quarter fewer commands (1,000 services: ~30 ms of ~250 ms). Sets
	// and maps are flushed whether or not they exist: nft lays out an
	// interval set it has just flushed without the "0 [end]" element it
	// adds to one it has not, and the partial syncs were checked against
	// that layout.
	hadChain := existing.hasChains()
	if resetBase {
		for _, n := range chains {
			if c := next.Chains[n]; c.Hook != "" && hadChain[n] {
				tx.Add(c.object())
				tx.Delete(&knftables.Chain{Name: n})
			}
		}
	}
	for _, n := range hotSetsFirst(sortedKeys(next.Sets)) {
		tx.Add(next.Sets[n].object())
	}
	for _, n := range chains {
		tx.Add(next.Chains[n].object())
		if hadChain[n] {
			tx.Flush(&knftables.Chain{Name: n})
		}
	}
	for _, n := range chains {
		addRules(tx, next.Chains[n])
	}
	st.chainsWritten = len(chains)
	for _, n := range sortedKeys(next.Elements) {
		s := next.Sets[n]
		tx.Flush(s.ref())
		for _, k := range sortedKeys(next.Elements[n]) {
			tx.Add(s.elementObject(k, next.Elements[n][k]))
			st.elementsAdded++
		}
	}
	var gone []string
	for _, n := range existing.chains {
		if _, ok := next.Chains[n]; !ok {
			gone = append(gone, n)
		}
	}
	slices.Sort(gone)
	for _, n := range gone {
		tx.Flush(&knftables.Chain{Name: n})
	}
	for _, n := range gone {
		tx.Delete(&knftables.Chain{Name: n})
	}
	st.chainsRemoved = len(gone)
	for _, n := range existing.sets {
		if _, ok := next.Sets[n]; !ok {
			tx.Delete(&knftables.Set{Name: n})
		}
	}
	for _, n := range existing.maps {
		if _, ok := next.Sets[n]; !ok {
			tx.Delete(&knftables.Map{Name: n})
		}
	}
	return st
}

func addRules(tx txWriter, c *Chain) {
	for _, r := range c.Rules {
		tx.Add(&knftables.Rule{Chain: c.Name, Rule: r})
	}
}

// hotSetsFirst orders set names for creation: the kernel finds a set by
// walking the table's list of sets in creation order, once per rule that
// names it and once per element message, so the few sets every service
// touches (service-ips, cluster-ips, the hairpin set) go before the 96
// endpoint maps each of which only its shard's services name. Measured on
// a 10,000-service full load (120,000 elements): 5.6 s → 4.5 s.
func hotSetsFirst(names []string) []string {
	out := make([]string, 0, len(names))
	for _, shards := range []bool{false, true} {
		for _, n := range names {
			if strings.HasPrefix(n, prefixEndpoints) == shards {
				out = append(out, n)
			}
		}
	}
	return out
}
