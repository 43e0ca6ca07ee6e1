package nftables

import (
	"slices"
	"strings"

	"sigs.k8s.io/knftables"
)

// A partial transaction is written one way whichever path found the
// difference: planPartial compares two whole rulesets, planIncremental
// only the changed services' fragments; both fill a delta, and emit
// writes it. The order emit writes in is the one nft and the netlink
// translation depend on (sets before the rules naming them, elements
// after both, chains flushed before any is deleted), so it lives in one
// place.

// delta is what a partial transaction changes, in no particular order:
// emit sorts each list.
type delta struct {
	sets       []setWrite   // sets created, or recreated with another definition
	chains     []chainWrite // chains created or rewritten whole
	dels, adds []elemOp     // elements deleted (value unused) and added
	chainsGone []string     // chains removed
	setsGone   []*Set       // sets removed
	// flowAdd, flowDel: the flowtable is created (empty, before the
	// rule naming it) or deleted (after the chain holding that rule).
	flowAdd, flowDel bool
}

// setWrite is one set to create; old is the definition to delete first,
// nil for a new set.
type setWrite struct{ old, cur *Set }

// chainWrite is one chain to write; existed says it is in the kernel
// table already (flushed, not created).
type chainWrite struct {
	chain   *Chain
	existed bool
}

// elemOp is one element of one set or map.
type elemOp struct {
	set        *Set
	key, value string
}

func byElem(a, b elemOp) int {
	if c := strings.Compare(a.set.Name, b.set.Name); c != 0 {
		return c
	}
	return strings.Compare(a.key, b.key)
}

// emit writes d into tx: new and recreated sets, new chains, changed
// chains flushed and rewritten, element deletions then additions, then
// removed chains (all flushed before any is deleted, since they may
// reference each other) and removed sets; each group in name order.
func emit(tx txWriter, d *delta) planStats {
	if d.flowAdd {
		tx.Add(flowtableObject(nil))
	}
	slices.SortFunc(d.sets, func(a, b setWrite) int { return strings.Compare(a.cur.Name, b.cur.Name) })
	for _, s := range d.sets {
		if s.old != nil {
			// Sets cannot be altered; only their contents ever
			// change in practice (names carry the definition).
			tx.Delete(s.old.ref())
		}
		tx.Add(s.cur.object())
	}
	slices.SortFunc(d.chains, func(a, b chainWrite) int { return strings.Compare(a.chain.Name, b.chain.Name) })
	for _, c := range d.chains {
		if !c.existed {
			tx.Add(c.chain.object())
		}
	}
	for _, c := range d.chains {
		if c.existed {
			tx.Flush(&knftables.Chain{Name: c.chain.Name})
		}
		addRules(tx, c.chain)
	}
	slices.SortFunc(d.dels, byElem)
	for _, e := range d.dels {
		tx.Delete(e.set.elementObject(e.key, ""))
	}
	slices.SortFunc(d.adds, byElem)
	for _, e := range d.adds {
		tx.Add(e.set.elementObject(e.key, e.value))
	}
	slices.Sort(d.chainsGone)
	for _, n := range d.chainsGone {
		tx.Flush(&knftables.Chain{Name: n})
	}
	for _, n := range d.chainsGone {
		tx.Delete(&knftables.Chain{Name: n})
	}
	slices.SortFunc(d.setsGone, func(a, b *Set) int { return strings.Compare(a.Name, b.Name) })
	for _, s := range d.setsGone {
		tx.Delete(s.ref())
	}
	if d.flowDel {
		tx.Delete(&knftables.Flowtable{Name: flowtableName})
	}
	return planStats{chainsWritten: len(d.chains), chainsRemoved: len(d.chainsGone),
		elementsAdded: len(d.adds), elementsDeled: len(d.dels)}
}
