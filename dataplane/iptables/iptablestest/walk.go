package iptablestest

import (
	"fmt"
	"net/netip"
	"slices"

	"github.com/switchyard-proxy/switchyard/dataplane/explain"
	"github.com/switchyard-proxy/switchyard/dataplane/ipset/ipsettest"
)

// Walker walks the first packet of a connection through chains of
// iptables rules, as the kernel would: in order, into jumped-to chains
// and back, until a target decides. A -m statistic rule splits the walk
// in two branches, one per outcome, each with its share of connections.
// It holds no rules itself, so the modes whose fakes keep rules and
// ipsets apart (ipvstest) walk theirs too. A Walker caches the rules it
// parsed: one per trace, never shared between goroutines.
type Walker struct {
	// Rules returns the rules of a chain of a table, as restore input
	// spells them after "-A CHAIN "; false when the chain does not exist.
	Rules func(table, chain string) ([]string, bool)
	// Sets are the ipsets -m set matches, by name.
	Sets map[string]ipsettest.Set
	// Local reports whether an address is the node's own: what
	// -m addrtype LOCAL matches.
	Local func(netip.Addr) bool

	parsed map[string]*rule
}

// Branch is one way the packet goes, with the share of connections that
// go that way.
type Branch struct {
	// Pkt is the packet as it is now: a DNAT or a virtual server
	// rewrites its destination and port.
	Pkt   explain.Packet
	Share float64
	// Mark is the packet's netfilter mark.
	Mark uint32
	// Endpoint is what a DNAT or a virtual server chose; the zero value
	// while the packet keeps its destination.
	Endpoint netip.AddrPort
	// Affinity is the seconds of the last -m recent --rcheck the packet
	// met (or of a persistent virtual server).
	Affinity uint32
	// Target is the target that ended the last Walk: ACCEPT, DROP,
	// REJECT, DNAT or MASQUERADE; "" when the built-in chain's policy
	// (ACCEPT in every Fake) did.
	Target string
	// Path is what the packet went through: "table/chain" for each chain
	// entered, and the targets that acted on it.
	Path []string
}

// Step returns b with s added to its path; branches never share the
// path's backing array.
func (b Branch) Step(s string) Branch {
	b.Path = append(slices.Clip(b.Path), s)
	return b
}

// Forwarded reports whether the destination was rewritten to an endpoint.
func (b Branch) Forwarded() bool { return b.Endpoint.IsValid() }

// maxDepth bounds nested jumps: the kernel refuses loops; a Fake may hold
// one, and the walk must end.
const maxDepth = 32

// Walk runs b through a built-in chain of table and returns the branches
// it ends in, each with its Target. An error names a rule the tracer
// does not understand, a missing chain or set, or a loop.
func (w *Walker) Walk(table, chain string, b Branch) ([]Branch, error) {
	b.Target = ""
	ends, err := w.chain(table, chain, b, 0)
	if err != nil {
		return nil, fmt.Errorf("%s/%s: %w", table, chain, err)
	}
	for i := range ends {
		if ends[i].Target == "RETURN" {
			ends[i].Target = "" // the built-in chain's policy decides
		}
	}
	return ends, nil
}

// chain walks one chain. Ended branches carry their target; "" means the
// chain ran out, "RETURN" that a rule left it.
func (w *Walker) chain(table, name string, b Branch, depth int) ([]Branch, error) {
	if depth > maxDepth {
		return nil, fmt.Errorf("jumps nested deeper than %d at %s", maxDepth, name)
	}
	rules, ok := w.Rules(table, name)
	if !ok {
		return nil, fmt.Errorf("no chain %s in table %s", name, table)
	}
	return w.from(table, rules, 0, b.Step(table+"/"+name), depth)
}

// from walks rules[i:] of a chain.
func (w *Walker) from(table string, rules []string, i int, b Branch, depth int) ([]Branch, error) {
	for ; i < len(rules); i++ {
		r, err := w.rule(rules[i])
		if err != nil {
			return nil, err
		}
		ok, err := w.matches(r, &b)
		if err != nil {
			return nil, fmt.Errorf("rule %q: %w", r.raw, err)
		}
		if !ok {
			continue
		}
		var out []Branch
		if r.prob < 1 {
			// The connections the statistic does not pick go on.
			miss := b
			miss.Share *= 1 - r.prob
			rest, err := w.from(table, rules, i+1, miss, depth)
			if err != nil {
				return nil, err
			}
			out = rest
			b.Share *= r.prob
		}
		hits, err := w.target(table, r, b, depth)
		if err != nil {
			return nil, err
		}
		for _, h := range hits {
			if h.Target != "" {
				out = append(out, h)
				continue
			}
			more, err := w.from(table, rules, i+1, h, depth)
			if err != nil {
				return nil, err
			}
			out = append(out, more...)
		}
		return out, nil
	}
	b.Target = ""
	return []Branch{b}, nil
}

// matches evaluates a rule's conditions; a probability below 1 is the
// caller's to split on.
func (w *Walker) matches(r *rule, b *Branch) (bool, error) {
	for _, c := range r.conds {
		ok, err := c(w, b)
		if err != nil || !ok {
			return false, err
		}
	}
	if r.rcheck {
		// The client was never seen, so the check fails; it still
		// says the connections of this path have affinity.
		b.Affinity = r.seconds
		return false, nil
	}
	return r.prob > 0, nil
}

// target applies a matching rule's target. Branches with Target "" go
// on after the rule; the others ended the chain.
func (w *Walker) target(table string, r *rule, b Branch, depth int) ([]Branch, error) {
	switch r.target {
	case "", "LOG":
		return []Branch{b}, nil
	case "ACCEPT", "DROP", "REJECT", "RETURN", "MASQUERADE":
		b = b.Step(r.target)
		b.Target = r.target
		return []Branch{b}, nil
	case "MARK":
		b.Mark = r.mark(b.Mark)
		return []Branch{b.Step(fmt.Sprintf("MARK 0x%x", b.Mark))}, nil
	case "DNAT":
		ep := r.dnat
		if ep.Port() == 0 {
			ep = netip.AddrPortFrom(ep.Addr(), b.Pkt.Port)
		}
		b.Pkt.Dst, b.Pkt.Port, b.Endpoint = ep.Addr(), ep.Port(), ep
		b = b.Step("DNAT " + ep.String())
		b.Target = "DNAT"
		return []Branch{b}, nil
	}
	sub, err := w.chain(table, r.target, b, depth+1)
	if err != nil {
		return nil, err
	}
	for i := range sub {
		switch t := sub[i].Target; {
		case r.goTo && (t == "" || t == "RETURN"):
			// A chain entered by -g returns past the rule that went
			// there, to the chain that called this one.
			sub[i].Target = "RETURN"
		case t == "RETURN":
			sub[i].Target = "" // back in the calling chain
		}
	}
	return sub, nil
}

// rule parses a rule once per Walker.
func (w *Walker) rule(raw string) (*rule, error) {
	if r, ok := w.parsed[raw]; ok {
		return r, nil
	}
	r, err := parseRule(raw)
	if err != nil {
		return nil, err
	}
	if w.parsed == nil {
		w.parsed = map[string]*rule{}
	}
	w.parsed[raw] = r
	return r, nil
}

func (w *Walker) set(name string) (ipsettest.Set, bool) {
	s, ok := w.Sets[name]
	return s, ok
}
