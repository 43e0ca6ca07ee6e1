package nftables

import (
	"errors"
	"fmt"
	"iter"
	"maps"
	"slices"
	"strings"

	"github.com/switchyard-proxy/switchyard/dataplane/fragments"
	"github.com/switchyard-proxy/switchyard/dataplane/internal/sorted"
	switchyardv1 "github.com/switchyard-proxy/switchyard/proto/switchyard/v1"
)

// Memo keeps each service's rendered objects between Renders of one
// family, so a sync renders (and validates) only the services that
// changed: rendering and validating every service cost hundreds of times
// the kernel work of an endpoint change that only touches map elements
// (BENCHMARKS.md section 9). A Memo is not safe for concurrent use; the
// zero value is ready.
type Memo struct {
	fragments.Memo[*fragment]
	// last is the previous result, whose sizes presize the next one.
	last *Ruleset
	// slots are the endpoint-map blocks of the chains in the fragments.
	slots *slotRanges
}

// fragment is what one service contributed to a ruleset: in rs its own
// chains and sets (never shared: names carry the service) with their
// elements, in shared its elements of the shared maps (service-ips,
// hairpin…), in blocks the chains that own an endpoint-map block. It is
// frozen once rendered, and compact: a memo holds one per service for
// the life of the agent, and as maps (five per service) they were a
// third of its heap at 10,000 services; as a sorted slice a service's
// dozen shared elements take a tenth of that.
type fragment struct {
	rs     *Ruleset
	shared []sharedElem
	blocks []string
}

// sharedElem is one element of a shared set or map; value is "" in a set.
type sharedElem struct{ set, key, value string }

// freeze makes the fragment of a service rendered into rs: the elements
// of sets rs does not declare move to shared, the blocks to a slice, and
// empty maps are dropped (nil reads as empty; nothing writes a fragment).
func freeze(rs *Ruleset) *fragment {
	f := &fragment{rs: rs}
	n := 0
	for set, elems := range rs.Elements {
		if _, own := rs.Sets[set]; !own {
			n += len(elems)
		}
	}
	f.shared = make([]sharedElem, 0, n)
	for set, elems := range rs.Elements {
		if _, own := rs.Sets[set]; own {
			continue
		}
		for k, v := range elems {
			f.shared = append(f.shared, sharedElem{set, k, v})
		}
		delete(rs.Elements, set)
	}
	slices.SortFunc(f.shared, bySetAndKey)
	if len(rs.blocks) > 0 {
		f.blocks = sorted.Keys(rs.blocks)
	}
	rs.blocks = nil
	if len(rs.Elements) == 0 {
		rs.Elements = nil
	}
	if len(rs.Sets) == 0 {
		rs.Sets = nil
	}
	if len(rs.udp) == 0 {
		rs.udp = nil
	}
	return f
}

// sharedValue returns the value f holds for a key of a shared set.
func (f *fragment) sharedValue(set, key string) string {
	i, _ := slices.BinarySearchFunc(f.shared, sharedElem{set: set, key: key}, bySetAndKey)
	return f.shared[i].value
}

func bySetAndKey(a, b sharedElem) int {
	if c := strings.Compare(a.set, b.set); c != 0 {
		return c
	}
	return strings.Compare(a.key, b.key)
}

// sharedBySet yields the shared elements of f one set at a time (they
// are sorted by set).
func (f *fragment) sharedBySet() iter.Seq2[string, []sharedElem] {
	return func(yield func(string, []sharedElem) bool) {
		for i := 0; i < len(f.shared); {
			j := i + 1
			for j < len(f.shared) && f.shared[j].set == f.shared[i].set {
				j++
			}
			if !yield(f.shared[i].set, f.shared[i:j]) {
				return
			}
			i = j
		}
	}
}

// sharedElems returns the shared elements of f, none for a nil fragment
// (a service added or removed).
func sharedElems(f *fragment) []sharedElem {
	if f == nil {
		return nil
	}
	return f.shared
}

func (r *renderer) memoKey() string {
	// All of the node's settings, not only what fragments read: an
	// incremental sync (incremental.go) writes nothing but the changed
	// services, so a change of the fixed objects must miss the memo.
	return fmt.Sprintf("%v|%+v|flow=%v", r.fam, r.node, r.flow)
}

// renderFragment renders one service into a ruleset of its own.
func (r *renderer) renderFragment(name string, sv *switchyardv1.ServiceView) *fragment {
	scratch := &renderer{fam: r.fam, node: r.node, rs: newRuleset(r.fam), slots: r.slots}
	scratch.service(name, sv)
	return freeze(scratch.rs)
}

// replay adds a fragment to the ruleset being rendered. Fragments are
// shared between Renders, so nothing of theirs is modified: the maps of
// the service's own sets are shared as they are, elements of shared sets
// are copied in.
func (r *renderer) replay(f *fragment) {
	rs := r.rs
	maps.Copy(rs.Chains, f.rs.Chains)
	maps.Copy(rs.Sets, f.rs.Sets)
	maps.Copy(rs.Elements, f.rs.Elements) // its own sets' maps, shared as they are
	for set, elems := range f.sharedBySet() {
		dst := rs.Elements[set]
		if dst == nil {
			dst = map[string]string{}
			rs.Elements[set] = dst
		}
		for _, e := range elems {
			dst[e.key] = e.value
		}
	}
	rs.Skips = append(rs.Skips, f.rs.Skips...)
	maps.Copy(rs.udp, f.rs.udp)
	for _, c := range f.blocks {
		rs.blocks[c] = true
	}
}

// validateFragment checks the references of a newly rendered fragment
// against the whole ruleset, as Validate does for all of it: reused
// fragments were checked when they were rendered, and the names they
// reference are their own or fixed ones.
func validateFragment(f *fragment, whole *Ruleset) error {
	return validateIn(f, whole, whole)
}

// validateIn checks a fragment's references against the chains and sets
// of two rulesets (the fragment itself and the applied one, for an
// incremental sync).
func validateIn(f *fragment, a, b *Ruleset) error {
	hasChain := func(n string) bool { _, x := a.Chains[n]; _, y := b.Chains[n]; return x || y }
	hasSet := func(n string) bool { _, x := a.Sets[n]; _, y := b.Sets[n]; return x || y }
	errs := f.rs.checkAllRefs(hasChain, hasSet)
	for set, elems := range f.sharedBySet() {
		if !hasSet(set) {
			errs = append(errs, fmt.Errorf("elements of missing set %s", set))
		}
		for _, e := range elems {
			errs = append(errs, checkRefs(func() string { return "element " + set + " { " + e.key + " }" }, e.value, hasChain, hasSet)...)
		}
	}
	return errors.Join(errs...)
}

// presize grows the maps of a fresh ruleset to the sizes of like, so
// replaying thousands of services does not rehash them step by step.
func (rs *Ruleset) presize(like *Ruleset) {
	chains := make(map[string]*Chain, len(like.Chains))
	maps.Copy(chains, rs.Chains)
	rs.Chains = chains
	sets := make(map[string]*Set, len(like.Sets))
	maps.Copy(sets, rs.Sets)
	rs.Sets = sets
	elems := make(map[string]map[string]string, len(like.Elements))
	for n, m := range rs.Elements {
		if old := like.Elements[n]; len(old) > len(m) {
			grown := make(map[string]string, len(old))
			maps.Copy(grown, m)
			m = grown
		}
		elems[n] = m
	}
	rs.Elements = elems
}
