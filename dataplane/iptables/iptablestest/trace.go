package iptablestest

import (
	"net/netip"
	"slices"

	"github.com/switchyard-proxy/switchyard/dataplane/explain"
	"github.com/switchyard-proxy/switchyard/dataplane/ipset/ipsettest"
)

// Trace says what the rules f holds do with the first packet of a
// connection, on a node whose own addresses are nodeIPs (loopback is
// local too): the iptables mode's packet tracer, as kube-proxy's
// iptablesTracer walks its fake, but through the hooks the packet really
// takes (Stack), with -m statistic shares, marks and ipsets. Rules the
// tracer does not understand are an error, never skipped.
func (f *Fake) Trace(pkt explain.Packet, nodeIPs []netip.Addr) (explain.Verdict, error) {
	s := Stack{Walker: f.Walker(pkt.IPv6(), Local(nodeIPs...))}
	return s.Trace(pkt)
}

// Walker returns a Walker over f's rules of one family and a snapshot of
// its ipsets, with local as -m addrtype LOCAL.
func (f *Fake) Walker(ipv6 bool, local func(netip.Addr) bool) *Walker {
	fam := FamilyName(ipv6)
	return &Walker{
		Rules: func(table, chain string) ([]string, bool) { return f.Rules(fam, table, chain) },
		Sets:  SetsByName(f.sets.Sets()),
		Local: local,
	}
}

// FamilyName is the binary family a Fake keeps tables by: "iptables" or
// "ip6tables".
func FamilyName(ipv6 bool) string {
	if ipv6 {
		return "ip6tables"
	}
	return "iptables"
}

// Rules returns the rules of one chain of family fam ("iptables",
// "ip6tables"), false when the chain does not exist.
func (f *Fake) Rules(fam, table, chain string) ([]string, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	c, ok := f.fams[fam][table][chain]
	if !ok {
		// A table restore never named still has its built-in chains.
		if _, t := f.fams[fam][table]; !t && slices.Contains(builtins[table], chain) {
			return nil, true
		}
		return nil, false
	}
	return slices.Clone(c.rules), true
}

// SetsByName indexes sets by name, for Walker.Sets.
func SetsByName(sets []ipsettest.Set) map[string]ipsettest.Set {
	m := make(map[string]ipsettest.Set, len(sets))
	for _, s := range sets {
		m[s.Name] = s
	}
	return m
}

// Local returns -m addrtype LOCAL for a node with addresses addrs:
// those and loopback.
func Local(addrs ...netip.Addr) func(netip.Addr) bool {
	return func(a netip.Addr) bool {
		a = a.Unmap()
		return a.IsLoopback() || slices.ContainsFunc(addrs, func(x netip.Addr) bool { return x.Unmap() == a })
	}
}
