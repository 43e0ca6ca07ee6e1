package nftables

import (
	"maps"
	"slices"
	"strings"

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

// blockMap reports whether set is an endpoint or maglev map, whose keys
// lie in the block of one balancing chain (slots.go): each key has one
// owner by construction, the fragment holding it, so the owners index
// leaves them out (a maglev service's thousands of slots made it the
// largest thing the agent kept) and moveBlockElements diffs them.
func blockMap(set string) bool {
	return strings.HasPrefix(set, prefixEndpoints) || strings.HasPrefix(set, prefixMaglev)
}

// buildOwners records the shared elements of every fragment, but those of
// block maps.
func buildOwners(m *Memo) *owners {
	o := &owners{one: map[string]map[string]string{}, many: map[elemKey][]owner{}}
	for name, f := range m.All() {
		for set, elems := range f.sharedBySet() {
			if blockMap(set) {
				continue
			}
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
	// blocks are the block-map elements the changes touched: the value
	// after, nil for one removed.
	blocks map[elemKey]*string
	stats  planStats
	// udpOld, udpNew are the changed services' UDP ports, for conntrack.
	udpOld, udpNew map[string]conntrack.UDPPort
}

// planIncremental writes into tx what planPartial would write for the
// same change, in the same order, looking only at the changed services:
// it diffs their fragments, moves their ownership of shared elements,
// and writes both with the emitter every partial transaction uses.
func planIncremental(tx txWriter, rs *Ruleset, own *owners, changes []change) *incPlan {
	p := &incPlan{changes: changes}
	d := diffFragments(rs, changes)
	p.shared = moveOwners(d, rs, own, changes)
	p.blocks = moveBlockElements(d, rs, changes)
	p.udpOld, p.udpNew = udpPorts(changes)
	p.stats = emit(tx, d)
	return p
}

// frag is a fragment's ruleset; a missing fragment is an empty one.
func frag(f *fragment, empty *Ruleset) *Ruleset {
	if f == nil {
		return empty
	}
	return f.rs
}

// diffFragments returns what changed in the changed services' own
// objects: their sets, chains and own sets' elements. rs, the applied
// ruleset, tells which chains the kernel holds already.
func diffFragments(rs *Ruleset, changes []change) *delta {
	d := &delta{}
	empty := newRuleset(rs.Family)
	for _, c := range changes {
		o, n := frag(c.Old, empty), frag(c.New, empty)
		for name, s := range n.Sets {
			if old, ok := o.Sets[name]; !ok {
				d.sets = append(d.sets, setWrite{cur: s})
			} else if !sameSet(old, s) {
				d.sets = append(d.sets, setWrite{old: old, cur: s})
			}
		}
		for name, s := range o.Sets {
			if _, ok := n.Sets[name]; !ok {
				d.setsGone = append(d.setsGone, s)
			}
		}
		for name, ch := range n.Chains {
			if old, ok := o.Chains[name]; !ok || !slices.Equal(old.Rules, ch.Rules) {
				_, existed := rs.Chains[name]
				d.chains = append(d.chains, chainWrite{chain: ch, existed: existed})
			}
		}
		for name := range o.Chains {
			if _, ok := n.Chains[name]; !ok {
				d.chainsGone = append(d.chainsGone, name)
			}
		}
		for name, elems := range n.Elements {
			s, ownSet := n.Sets[name]
			if !ownSet {
				continue
			}
			old := o.Elements[name]
			recreated := o.Sets[name] == nil || !sameSet(o.Sets[name], s)
			for k, v := range elems {
				if ov, ok := old[k]; recreated || !ok || ov != v {
					d.adds = append(d.adds, elemOp{set: s, key: k, value: v})
				}
			}
			if recreated {
				continue
			}
			for k, v := range old {
				if nv, ok := elems[k]; !ok || nv != v {
					d.dels = append(d.dels, elemOp{set: o.Sets[name], key: k})
				}
			}
		}
	}
	return d
}

// moveOwners moves the changed services' ownership of shared elements
// (service-ips, hairpin-endpoints…) and adds to d each element whose
// effective value changed. It returns the owners after the change of
// every key it touched, for commit.
func moveOwners(d *delta, rs *Ruleset, own *owners, changes []change) map[elemKey][]owner {
	shared := map[elemKey][]owner{}
	before := map[elemKey]string{}
	hadBefore := map[elemKey]bool{}
	touch := func(ek elemKey) []owner {
		cur, ok := shared[ek]
		if !ok {
			cur = own.get(rs, ek)
			if v, had := effective(cur); had {
				before[ek], hadBefore[ek] = v, true
			}
		}
		return cur
	}
	for _, c := range changes {
		for _, e := range sharedElems(c.Old) {
			if blockMap(e.set) {
				continue
			}
			ek := elemKey{e.set, e.key}
			shared[ek] = slices.DeleteFunc(touch(ek), func(w owner) bool { return w.svc == c.Name })
		}
		for _, e := range sharedElems(c.New) {
			if blockMap(e.set) {
				continue
			}
			ek := elemKey{e.set, e.key}
			cur := touch(ek)
			i, _ := slices.BinarySearchFunc(cur, c.Name, func(w owner, name string) int { return strings.Compare(w.svc, name) })
			shared[ek] = slices.Insert(cur, i, owner{c.Name, e.value})
		}
	}
	for ek, cur := range shared {
		after, hasAfter := effective(cur)
		b, hadB := before[ek], hadBefore[ek]
		s := rs.Sets[ek.set]
		if hadB && (!hasAfter || after != b) {
			d.dels = append(d.dels, elemOp{set: s, key: ek.key})
		}
		if hasAfter && (!hadB || after != b) {
			d.adds = append(d.adds, elemOp{set: s, key: ek.key, value: after})
		}
	}
	return shared
}

// moveBlockElements adds to d the changes of the changed services'
// block-map elements (blockMap: one owner per key, the fragment holding
// it): a key gone or whose value changed is deleted, a new or changed one
// added. It returns each touched key's value after the change (nil:
// removed), for commit.
func moveBlockElements(d *delta, rs *Ruleset, changes []change) map[elemKey]*string {
	before, after := map[elemKey]string{}, map[elemKey]string{}
	for _, c := range changes {
		for _, e := range sharedElems(c.Old) {
			if blockMap(e.set) {
				before[elemKey{e.set, e.key}] = e.value
			}
		}
		for _, e := range sharedElems(c.New) {
			if blockMap(e.set) {
				after[elemKey{e.set, e.key}] = e.value
			}
		}
	}
	out := make(map[elemKey]*string, len(before)+len(after))
	for ek, b := range before {
		if a, ok := after[ek]; !ok || a != b {
			d.dels = append(d.dels, elemOp{set: rs.Sets[ek.set], key: ek.key})
		}
		out[ek] = nil
	}
	for ek, a := range after {
		if b, ok := before[ek]; !ok || a != b {
			d.adds = append(d.adds, elemOp{set: rs.Sets[ek.set], key: ek.key, value: a})
		}
		out[ek] = &a
	}
	return out
}

// udpPorts returns the changed services' UDP ports before and after the
// change, for conntrack.
func udpPorts(changes []change) (old, cur map[string]conntrack.UDPPort) {
	old, cur = map[string]conntrack.UDPPort{}, map[string]conntrack.UDPPort{}
	for _, c := range changes {
		if c.Old != nil {
			maps.Copy(old, c.Old.rs.udp)
		}
		if c.New != nil {
			maps.Copy(cur, c.New.rs.udp)
		}
	}
	return old, cur
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
	for ek, v := range p.blocks {
		if v == nil {
			delete(rs.Elements[ek.set], ek.key)
			continue
		}
		if rs.Elements[ek.set] == nil {
			rs.Elements[ek.set] = map[string]string{}
		}
		rs.Elements[ek.set][ek.key] = *v
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
