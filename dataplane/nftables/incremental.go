package nftables

import (
	"slices"
	"strings"

	"sigs.k8s.io/knftables"

	"github.com/switchyard-proxy/switchyard/dataplane"
	"github.com/switchyard-proxy/switchyard/dataplane/conntrack"
	"github.com/switchyard-proxy/switchyard/dataplane/fragments"
)

// A partial sync that neither renders nor compares the whole state: with
// the memo holding every service's fragment of the applied ruleset, only
// the services whose view changed are rendered and diffed against their
// old fragment, and the applied ruleset is then updated in place. The
// whole-state path (render with memo + planPartial) costs, for a
// one-endpoint change, mostly merging and comparing every hairpin pair
// (BENCHMARKS.md section 9); this path costs what the change does.

// owner is one service's value for an element of a shared set or map
// (service-ips, hairpin-endpoints…). Several services may hold the same
// key (two services sharing a pod hold the same hairpin pair); the last
// in name order wins, as in a full Render.
type owner struct{ svc, value string }

// owners records which services hold each element of the shared sets
// and maps, for the incremental path: almost every key has one owner,
// kept as its name alone (its value is the applied element's); the few
// keys several services hold keep every owner with its value, sorted by
// service. A list per key was the largest thing the agent kept
// (BENCHMARKS.md section 9).
type owners struct {
	one  map[string]map[string]string // set → key → the only owner
	many map[elemKey][]owner
}

// buildOwners records the shared elements of every fragment.
func buildOwners(m *Memo) *owners {
	o := &owners{one: map[string]map[string]string{}, many: map[elemKey][]owner{}}
	for name, f := range m.All() {
		for set, elems := range f.sharedBySet() {
			keys := o.keys(set)
			for _, e := range elems {
				o.add(m, keys, name, e)
			}
		}
	}
	return o
}

// keys returns the single owners of set's keys, creating the map.
func (o *owners) keys(set string) map[string]string {
	keys := o.one[set]
	if keys == nil {
		keys = map[string]string{}
		o.one[set] = keys
	}
	return keys
}

// add records svc as an owner of e; services come in name order.
func (o *owners) add(m *Memo, keys map[string]string, svc string, e sharedElem) {
	ek := elemKey{e.set, e.key}
	if many, ok := o.many[ek]; ok {
		o.many[ek] = append(many, owner{svc, e.value}) // names ascend: stays sorted
		return
	}
	first, ok := keys[e.key]
	if !ok {
		keys[e.key] = svc
		return
	}
	// A second owner: the first one's value is its fragment's.
	ff, _ := m.Get(first)
	o.many[ek] = []owner{{first, ff.sharedValue(e.set, e.key)}, {svc, e.value}}
	delete(keys, e.key)
}

// get returns the owners of a key, sorted by service, in a new slice; rs
// is the applied ruleset, which holds the value of a key with one owner.
func (o *owners) get(rs *Ruleset, ek elemKey) []owner {
	if many, ok := o.many[ek]; ok {
		return slices.Clone(many)
	}
	if svc, ok := o.one[ek.set][ek.key]; ok {
		return []owner{{svc, rs.Elements[ek.set][ek.key]}}
	}
	return nil
}

// put records the owners of a key after a committed change.
func (o *owners) put(ek elemKey, cur []owner) {
	switch len(cur) {
	case 0:
		delete(o.one[ek.set], ek.key)
		delete(o.many, ek)
	case 1:
		o.keys(ek.set)[ek.key] = cur[0].svc
		delete(o.many, ek)
	default:
		delete(o.one[ek.set], ek.key)
		o.many[ek] = cur
	}
}

// elemKey names one element of one set.
type elemKey struct{ set, key string }

// change is one service whose fragment differs.
type change = fragments.Change[*fragment]

// changes lists the services of st whose view differs from the memo's —
// among those hint names, when it is not nil — rendering their new
// fragments. It returns nil, false when the memo cannot be used (node
// config changed): the caller renders in full.
func (r *renderer) changes(st *dataplane.State, m *Memo, hint map[string]struct{}) ([]change, bool) {
	if m.slots == nil || !m.Holds(r.memoKey()) {
		return nil, false
	}
	r.slots = m.slots
	// In name order, as a full Render allocates endpoint-map blocks.
	return m.Changes(st.Services, hint, r.renderFragment), true
}

// incPlan is the transaction of an incremental sync and what to change in
// the applied ruleset once it has committed.
type incPlan struct {
	changes []change
	shared  map[elemKey][]owner // owners after the change, for touched keys
	stats   planStats
	// udpOld, udpNew are the changed services' UDP ports, for conntrack.
	udpOld, udpNew map[string]conntrack.UDPPort
}

// planIncremental writes into tx what planPartial would write for the
// same change, in the same order, looking only at the changed services.
func planIncremental(tx txWriter, rs *Ruleset, own *owners, changes []change) *incPlan {
	p := &incPlan{changes: changes, shared: map[elemKey][]owner{},
		udpOld: map[string]conntrack.UDPPort{}, udpNew: map[string]conntrack.UDPPort{}}
	empty := newRuleset(rs.Family)
	frag := func(f *fragment) *Ruleset {
		if f == nil {
			return empty
		}
		return f.rs
	}
	var setsNew, chainsWrite, chainsGone, setsGone []string
	newSets, oldSets := map[string]*Set{}, map[string]*Set{}
	newChains := map[string]*Chain{}
	type elemOp struct {
		set   *Set
		key   string
		value string
	}
	var dels, adds []elemOp
	before := map[elemKey]string{}
	hadBefore := map[elemKey]bool{}
	for _, c := range changes {
		o, n := frag(c.Old), frag(c.New)
		for name, s := range n.Sets {
			newSets[name] = s
			if old, ok := o.Sets[name]; !ok || !sameSet(old, s) {
				setsNew = append(setsNew, name)
			}
		}
		for name, s := range o.Sets {
			oldSets[name] = s
			if _, ok := n.Sets[name]; !ok {
				setsGone = append(setsGone, name)
			}
		}
		for name, ch := range n.Chains {
			newChains[name] = ch
			if old, ok := o.Chains[name]; !ok || !slices.Equal(old.Rules, ch.Rules) {
				chainsWrite = append(chainsWrite, name)
			}
		}
		for name := range o.Chains {
			if _, ok := n.Chains[name]; !ok {
				chainsGone = append(chainsGone, name)
			}
		}
		// Elements of the service's own sets.
		for name, elems := range n.Elements {
			s, ownSet := n.Sets[name]
			if !ownSet {
				continue
			}
			old := o.Elements[name]
			recreated := o.Sets[name] == nil || !sameSet(o.Sets[name], s)
			for k, v := range elems {
				if ov, ok := old[k]; recreated || !ok || ov != v {
					adds = append(adds, elemOp{s, k, v})
				}
			}
			if recreated {
				continue
			}
			for k, v := range old {
				if nv, ok := elems[k]; !ok || nv != v {
					dels = append(dels, elemOp{o.Sets[name], k, ""})
				}
			}
		}
		// Elements of shared sets: move this service's ownership.
		touch := func(set, key string) []owner {
			ek := elemKey{set, key}
			cur, ok := p.shared[ek]
			if !ok {
				cur = own.get(rs, ek)
				if v, had := effective(cur); had {
					before[ek], hadBefore[ek] = v, true
				}
			}
			return cur
		}
		for _, e := range sharedElems(c.Old) {
			cur := touch(e.set, e.key)
			p.shared[elemKey{e.set, e.key}] = slices.DeleteFunc(cur, func(w owner) bool { return w.svc == c.Name })
		}
		for _, e := range sharedElems(c.New) {
			cur := touch(e.set, e.key)
			i, _ := slices.BinarySearchFunc(cur, c.Name, func(w owner, name string) int { return strings.Compare(w.svc, name) })
			p.shared[elemKey{e.set, e.key}] = slices.Insert(cur, i, owner{c.Name, e.value})
		}
		for id, u := range o.udp {
			p.udpOld[id] = u
		}
		for id, u := range n.udp {
			p.udpNew[id] = u
		}
	}
	for ek, cur := range p.shared {
		after, hasAfter := effective(cur)
		b, hadB := before[ek], hadBefore[ek]
		s := rs.Sets[ek.set]
		if hadB && (!hasAfter || after != b) {
			dels = append(dels, elemOp{s, ek.key, ""})
		}
		if hasAfter && (!hadB || after != b) {
			adds = append(adds, elemOp{s, ek.key, after})
		}
	}

	// Emit in planPartial's order.
	slices.Sort(setsNew)
	for _, n := range setsNew {
		if old, ok := oldSets[n]; ok {
			tx.Delete(old.ref())
		}
		tx.Add(newSets[n].object())
	}
	slices.Sort(chainsWrite)
	for _, n := range chainsWrite {
		if _, ok := rs.Chains[n]; !ok {
			tx.Add(newChains[n].object())
		}
	}
	for _, n := range chainsWrite {
		if _, ok := rs.Chains[n]; ok {
			tx.Flush(&knftables.Chain{Name: n})
		}
		addRules(tx, newChains[n])
	}
	p.stats.chainsWritten = len(chainsWrite)
	byName := func(a, b elemOp) int {
		if c := strings.Compare(a.set.Name, b.set.Name); c != 0 {
			return c
		}
		return strings.Compare(a.key, b.key)
	}
	slices.SortFunc(dels, byName)
	for _, e := range dels {
		tx.Delete(e.set.elementObject(e.key, ""))
	}
	slices.SortFunc(adds, byName)
	for _, e := range adds {
		tx.Add(e.set.elementObject(e.key, e.value))
	}
	p.stats.elementsDeled, p.stats.elementsAdded = len(dels), len(adds)
	slices.Sort(chainsGone)
	for _, n := range chainsGone {
		tx.Flush(&knftables.Chain{Name: n})
	}
	for _, n := range chainsGone {
		tx.Delete(&knftables.Chain{Name: n})
	}
	p.stats.chainsRemoved = len(chainsGone)
	slices.Sort(setsGone)
	for _, n := range setsGone {
		tx.Delete(oldSets[n].ref())
	}
	return p
}

// effective is the value a shared element has: the last owner's.
func effective(os []owner) (string, bool) {
	if len(os) == 0 {
		return "", false
	}
	return os[len(os)-1].value, true
}

// commit applies a committed incremental plan to the applied ruleset,
// the owners and the memo.
func (p *incPlan) commit(rs *Ruleset, own *owners, m *Memo, nodeSkips []dataplane.Skip) {
	rebuildSkips := false
	for _, c := range p.changes {
		if c.Old != nil {
			for _, chain := range c.Old.blocks {
				if c.New == nil || !slices.Contains(c.New.blocks, chain) {
					m.slots.release(chain)
				}
				delete(rs.blocks, chain)
			}
			for name := range c.Old.rs.Chains {
				delete(rs.Chains, name)
			}
			for name := range c.Old.rs.Sets {
				delete(rs.Sets, name)
				delete(rs.Elements, name)
			}
			for id := range c.Old.rs.udp {
				delete(rs.udp, id)
			}
			rebuildSkips = rebuildSkips || len(c.Old.rs.Skips) > 0
		}
		if c.New == nil {
			m.Delete(c.Name)
			continue
		}
		f := c.New.rs
		for name, ch := range f.Chains {
			rs.Chains[name] = ch
		}
		for name, s := range f.Sets {
			rs.Sets[name] = s
			if elems, ok := f.Elements[name]; ok {
				rs.Elements[name] = elems
			}
		}
		for id, u := range f.udp {
			rs.udp[id] = u
		}
		for _, chain := range c.New.blocks {
			rs.blocks[chain] = true
		}
		rebuildSkips = rebuildSkips || len(f.Skips) > 0
		m.Put(c.Name, c.View, c.New)
	}
	for ek, cur := range p.shared {
		own.put(ek, cur)
		if len(cur) == 0 {
			delete(rs.Elements[ek.set], ek.key)
			continue
		}
		v, _ := effective(cur)
		if rs.Elements[ek.set] == nil {
			rs.Elements[ek.set] = map[string]string{}
		}
		rs.Elements[ek.set][ek.key] = v
	}
	if rebuildSkips {
		skips := slices.Clone(nodeSkips)
		for _, f := range m.All() {
			skips = append(skips, f.rs.Skips...)
		}
		rs.Skips = skips
	}
}
