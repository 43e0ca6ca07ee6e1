package iptables

import (
	"fmt"
	"slices"

	"github.com/switchyard-proxy/switchyard/dataplane"
	"github.com/switchyard-proxy/switchyard/dataplane/conntrack"
	"github.com/switchyard-proxy/switchyard/dataplane/fragments"
	switchyardv1 "github.com/switchyard-proxy/switchyard/proto/switchyard/v1"
)

// Memo keeps each service's rendered rules between Renders of one family,
// so a sync re-renders only the services that changed: rendering every
// service anew cost several times the kernel work of a one-service
// partial restore (BENCHMARKS.md section 9). A Memo is not safe for
// concurrent use; the zero value is ready.
type Memo struct {
	fragments.Memo[*fragment]
}

// fragment is what one service contributed to a ruleset: its own chains
// and its rules in shared chains, replayed in service order.
type fragment struct {
	chains []*Chain
	shards map[int][]string
	skips  []dataplane.Skip
	udp    map[string]conntrack.UDPPort
	// hairpin lists the hairpin set members of its endpoints.
	hairpin []string
}

// memoKey is the part of a renderer that every fragment depends on.
func (r *renderer) memoKey() string {
	return fmt.Sprintf("%v|%+v|%v|%v", r.fam, r.opts, r.node.ClusterCIDRs, r.node.MasqueradeAll)
}

// renderFragment renders one service into a scratch ruleset.
func (r *renderer) renderFragment(name string, sv *switchyardv1.ServiceView) *fragment {
	scratch := &renderer{fam: r.fam, opts: r.opts, node: r.node, rs: newRuleset(r.fam), shards: map[int][]string{}}
	scratch.service(name, sv)
	f := &fragment{shards: scratch.shards, skips: scratch.rs.Skips, udp: scratch.rs.udp,
		hairpin: scratch.rs.HairpinMembers()}
	for _, t := range scratch.rs.Tables() {
		for _, n := range scratch.rs.ChainNames(t) {
			f.chains = append(f.chains, scratch.rs.Chains[t][n])
		}
	}
	return f
}

// replay adds a fragment to the ruleset being rendered. Fragments are
// shared between Renders, so their slices are never appended to in place.
func (r *renderer) replay(f *fragment) {
	for _, c := range f.chains {
		mc, ok := r.rs.Chains[c.Table][c.Name]
		if !ok {
			r.rs.Chains[c.Table][c.Name] = &Chain{Table: c.Table, Name: c.Name, Rules: slices.Clip(c.Rules)}
			continue
		}
		mc.Rules = append(mc.Rules, c.Rules...)
	}
	for i, rules := range f.shards {
		r.shards[i] = append(r.shards[i], rules...)
	}
	r.rs.Skips = append(r.rs.Skips, f.skips...)
	for id, u := range f.udp {
		r.rs.udp[id] = u
	}
	for _, m := range f.hairpin {
		r.rs.addHairpin(m)
	}
}
