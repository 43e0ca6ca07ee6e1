package iptables

import (
	"context"
	"fmt"
	"maps"
	"slices"

	"github.com/switchyard-proxy/switchyard/dataplane"
	"github.com/switchyard-proxy/switchyard/dataplane/conntrack"
	"github.com/switchyard-proxy/switchyard/dataplane/fragments"
	"github.com/switchyard-proxy/switchyard/dataplane/ipset"
)

// A partial sync that looks only at what changed, as the nftables mode's
// does. The memo holds every service's fragment of the applied ruleset,
// so only the changed services (those the caller's hint names, when it
// gives one) are rendered; the chains they own are diffed against their
// old fragment, the shared chains they write to (shards, KUBE-NODEPORTS,
// the filter chains) are rebuilt from their contributors only, and the
// hairpin set and UDP ports change by the changed services' members. The
// whole-state path replayed every fragment, compared every chain and
// diffed every hairpin member for a one-endpoint change (cost in
// BENCHMARKS.md section 9, BenchmarkApplyOneEndpoint).

// famState is what a family's last successful sync left: the applied
// ruleset and who contributes to its shared chains.
type famState struct {
	rs  *Ruleset
	idx *index
}

// chainKey names a chain of a table.
type chainKey struct{ table, name string }

// index records, for the applied ruleset, which services put rules in
// each shared chain and shard (in name order, as their rules are) and how
// many services hold each hairpin member.
type index struct {
	shared  map[chainKey][]string
	shards  map[int][]string
	hairpin map[string]int
}

// isShared reports whether a fragment's chain is a fixed one that other
// services write to as well; every other chain is the service's own.
func isShared(name string) bool {
	return slices.Contains(ownedFixedChains, name)
}

// buildIndex indexes every fragment of m.
func buildIndex(m *Memo) *index {
	idx := &index{shared: map[chainKey][]string{}, shards: map[int][]string{}, hairpin: map[string]int{}}
	for name, f := range m.All() {
		for _, c := range f.chains {
			if isShared(c.Name) {
				k := chainKey{c.Table, c.Name}
				idx.shared[k] = append(idx.shared[k], name)
			}
		}
		for i := range f.shards {
			idx.shards[i] = append(idx.shards[i], name)
		}
		for _, h := range f.hairpin {
			idx.hairpin[h]++
		}
	}
	return idx
}

// change is one service whose fragment differs.
type change = fragments.Change[*fragment]

// changes renders the fragments of the services of st that changed —
// among those hint names, when it is not nil — with r, a renderer whose
// node is read from st. It returns false when the memo was rendered for
// other node settings: the caller renders in full.
func (r *renderer) changes(st *dataplane.State, m *Memo, hint map[string]struct{}) ([]change, bool) {
	if !m.Holds(r.memoKey()) {
		return nil, false
	}
	out := m.Changes(st.Services, hint, r.renderFragment)
	m.Rendered, m.Reused = len(out), len(st.Services)-len(out)
	return out, true
}

// incPlan is an incremental sync: the chains to write and remove, the
// hairpin set's changes and the changed services' UDP ports.
type incPlan struct {
	syncPlan
	hairpin ipset.Changes
	// udpOld, udpNew are the changed services' UDP ports, for conntrack.
	udpOld, udpNew map[string]conntrack.UDPPort
}

// planIncremental plans the sync of changes and makes cur's ruleset,
// index and hairpin members what they will be after it, in place: the
// caller drops cur when the sync fails (the next one is full). Its UDP
// ports, kept across a failed sync for conntrack, are the caller's to
// update after the commit. r is a renderer holding the fixed chains of
// the node and no service.
func planIncremental(r *renderer, cur *famState, m *Memo, changes []change) *incPlan {
	p := &incPlan{syncPlan: syncPlan{write: map[string][]string{}, remove: map[string][]string{}, before: map[string][]string{}},
		udpOld: map[string]conntrack.UDPPort{}, udpNew: map[string]conntrack.UDPPort{}}
	frags := map[string]*fragment{}
	for _, c := range changes {
		frags[c.Name] = c.New
	}
	frag := func(name string) *fragment {
		if f, ok := frags[name]; ok {
			return f
		}
		f, _ := m.Get(name)
		return f
	}
	rs := cur.rs
	touchedMembers := cur.idx.move(changes)
	filterSeen := map[string]bool{}
	setChain := func(t, n string, rules []string) {
		old, ok := rs.Chains[t][n]
		if ok && sameRules(old.Rules, rules) {
			return
		}
		if t == tableFilter && !filterSeen[n] {
			filterSeen[n] = true
			if ok {
				p.before[n] = old.Rules // what the kernel holds (phases)
			}
		}
		rs.Chains[t][n] = &Chain{Table: t, Name: n, Rules: rules}
		p.write[t] = append(p.write[t], n)
	}
	removeChain := func(t, n string) {
		if _, ok := rs.Chains[t][n]; ok {
			delete(rs.Chains[t], n)
			p.remove[t] = append(p.remove[t], n)
		}
	}
	// The services' own chains.
	for _, c := range changes {
		own := map[chainKey]bool{}
		if c.New != nil {
			for _, ch := range c.New.chains {
				if !isShared(ch.Name) {
					own[chainKey{ch.Table, ch.Name}] = true
					setChain(ch.Table, ch.Name, slices.Clip(ch.Rules))
				}
			}
		}
		if c.Old != nil {
			for _, ch := range c.Old.chains {
				if !isShared(ch.Name) && !own[chainKey{ch.Table, ch.Name}] {
					removeChain(ch.Table, ch.Name)
				}
			}
		}
	}
	// Shared chains the changes touch, rebuilt from their contributors.
	for k := range touched(changes, func(f *fragment, add func(chainKey)) {
		for _, ch := range f.chains {
			if isShared(ch.Name) {
				add(chainKey{ch.Table, ch.Name})
			}
		}
	}) {
		rules := slices.Clone(r.rs.Chains[k.table][k.name].Rules)
		for _, svc := range cur.idx.shared[k] {
			rules = append(rules, frag(svc).rulesOf(k)...)
		}
		setChain(k.table, k.name, rules)
	}
	// Shards, then KUBE-SERVICES: the dispatch of the shards left.
	shards := touched(changes, func(f *fragment, add func(int)) {
		for i := range f.shards {
			add(i)
		}
	})
	for i, svcs := range cur.idx.shards {
		if _, redo := shards[i]; !redo && len(svcs) > 0 {
			r.shards[i] = rs.Chains[tableNAT][shardChain(i)].Rules
		}
	}
	for i := range shards {
		var rules []string
		for _, svc := range cur.idx.shards[i] {
			rules = append(rules, frag(svc).shards[i]...)
		}
		r.shards[i] = rules
	}
	r.dispatch()
	for i := range shards {
		if n := shardChain(i); len(cur.idx.shards[i]) > 0 {
			setChain(tableNAT, n, r.rs.Chains[tableNAT][n].Rules)
		} else {
			removeChain(tableNAT, n)
		}
	}
	setChain(tableNAT, chainServices, r.rs.Chains[tableNAT][chainServices].Rules)
	p.planSets(rs, changes, touchedMembers, cur.idx)
	p.sortAll()
	return p
}

// planSets plans the hairpin set from the members the changes touched
// (with whether each was in the set before) and collects the changed
// services' UDP ports.
func (p *incPlan) planSets(rs *Ruleset, changes []change, members map[string]bool, idx *index) {
	have, want := map[string]struct{}{}, map[string]struct{}{}
	for h, had := range members {
		if had {
			have[h] = struct{}{}
		}
		if idx.hairpin[h] > 0 {
			want[h] = struct{}{}
			rs.hairpin[h] = struct{}{}
		} else {
			delete(rs.hairpin, h)
		}
	}
	p.hairpin = ipset.Diff(hairpinSpec(rs.HairpinSet, rs.Family), have, want, false)
	for _, c := range changes {
		if c.Old != nil {
			maps.Copy(p.udpOld, c.Old.udp)
		}
		if c.New != nil {
			maps.Copy(p.udpNew, c.New.udp)
		}
	}
}

// move updates idx, in place, for changes. It returns the hairpin members
// the changes touch, each with whether a service held it before.
func (idx *index) move(changes []change) map[string]bool {
	members := map[string]bool{}
	for _, c := range changes {
		for _, f := range []*fragment{c.Old, c.New} {
			if f != nil {
				for _, h := range f.hairpin {
					if _, seen := members[h]; !seen {
						members[h] = idx.hairpin[h] > 0
					}
				}
			}
		}
	}
	for _, c := range changes {
		if f := c.Old; f != nil {
			for _, ch := range f.chains {
				if isShared(ch.Name) {
					dropName(idx.shared, chainKey{ch.Table, ch.Name}, c.Name)
				}
			}
			for i := range f.shards {
				dropName(idx.shards, i, c.Name)
			}
			for _, h := range f.hairpin {
				if idx.hairpin[h]--; idx.hairpin[h] <= 0 {
					delete(idx.hairpin, h)
				}
			}
		}
		if f := c.New; f != nil {
			for _, ch := range f.chains {
				if k := (chainKey{ch.Table, ch.Name}); isShared(ch.Name) {
					idx.shared[k] = insertSorted(idx.shared[k], c.Name)
				}
			}
			for i := range f.shards {
				idx.shards[i] = insertSorted(idx.shards[i], c.Name)
			}
			for _, h := range f.hairpin {
				idx.hairpin[h]++
			}
		}
	}
	return members
}

// dropName removes name from the list of k, and the list when empty.
func dropName[K comparable](lists map[K][]string, k K, name string) {
	l := slices.DeleteFunc(lists[k], func(n string) bool { return n == name })
	if len(l) == 0 {
		delete(lists, k)
		return
	}
	lists[k] = l
}

// insertSorted returns sorted names with name inserted, once.
func insertSorted(names []string, name string) []string {
	i, found := slices.BinarySearch(names, name)
	if found {
		return names
	}
	return slices.Insert(names, i, name)
}

// touched collects what the old and new fragments of changes name.
func touched[K comparable](changes []change, each func(f *fragment, add func(K))) map[K]struct{} {
	out := map[K]struct{}{}
	add := func(k K) { out[k] = struct{}{} }
	for _, c := range changes {
		for _, f := range []*fragment{c.Old, c.New} {
			if f != nil {
				each(f, add)
			}
		}
	}
	return out
}

// rulesOf returns the fragment's rules in a shared chain.
func (f *fragment) rulesOf(k chainKey) []string {
	for _, c := range f.chains {
		if c.Table == k.table && c.Name == k.name {
			return c.Rules
		}
	}
	return nil
}

// sameRules compares two chains' rules, the same slice at a glance.
func sameRules(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	if len(a) == 0 || &a[0] == &b[0] {
		return true
	}
	return slices.Equal(a, b)
}

// skipsOf is the Skips of a ruleset made of the node's and every
// fragment's, in service order, as a full Render lists them.
func skipsOf(node []dataplane.Skip, m *Memo) []dataplane.Skip {
	out := slices.Clone(node)
	for _, f := range m.All() {
		out = append(out, f.skips...)
	}
	return out
}

// applyChanges writes an incremental sync of changes (see above): the
// hairpin members of new endpoints, the changed chains, then the members
// of gone ones. The memo and the UDP ports change once it has committed;
// a failure drops cur (Apply: the next sync is full).
func (d *Dataplane) applyChanges(ctx context.Context, fam dataplane.Family, r *renderer, cur *famState, m *Memo, changes []change) error {
	p := planIncremental(r, cur, m, changes)
	rs := cur.rs
	for _, c := range changes {
		if c.New == nil {
			continue
		}
		for _, s := range c.New.skips {
			d.log.Warn("skipped input", "family", fam.String(), "service", s.Service, "reason", s.Reason)
		}
	}
	if err := rs.validate(p.write); err != nil {
		return fmt.Errorf("render %s: %w", fam, err)
	}
	if err := d.ipsetRestore(ctx, p.hairpin.Pre); err != nil {
		return fmt.Errorf("hairpin set, before rules: %w", err)
	}
	if !p.empty() {
		for _, payload := range p.payloads(rs, d.maxChains()) {
			if err := d.restore(ctx, fam, payload); err != nil {
				return err
			}
			d.stats.Restores++
		}
	}
	rebuildSkips := false
	for _, c := range changes {
		rebuildSkips = rebuildSkips || (c.Old != nil && len(c.Old.skips) > 0) || (c.New != nil && len(c.New.skips) > 0)
		if c.New == nil {
			m.Delete(c.Name)
			continue
		}
		m.Put(c.Name, c.View, c.New)
	}
	if rebuildSkips {
		rs.Skips = skipsOf(r.rs.Skips, m)
	}
	// rs.udp is d.udp[fam] since the last sync: the changed ports only.
	for id := range p.udpOld {
		delete(rs.udp, id)
	}
	maps.Copy(rs.udp, p.udpNew)
	return d.finish(ctx, fam, cur, p.syncPlan, p.hairpin, conntrack.Stale(p.udpOld, p.udpNew))
}
