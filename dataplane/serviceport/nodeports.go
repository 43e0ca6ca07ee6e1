package serviceport

import (
	"fmt"
	"net/netip"
	"slices"

	"github.com/switchyard-proxy/switchyard/dataplane"
)

// Keywords of NodeConfig.node_port_addresses, as kube-proxy's
// nodePortAddresses spells them.
const (
	// NodePortsPrimary is the node's primary address of each family.
	NodePortsPrimary = "primary"
	// NodePortsAll is every local address.
	NodePortsAll = "all"
	// NodePortsLocalhost is kube-proxy's loopback keyword. Loopback node
	// ports need route_localnet, which Switchyard never sets: the
	// control plane refuses the keyword and an agent skips it.
	NodePortsLocalhost = "localhost"
)

// NodePorts says on which local addresses of one family node ports
// answer: NodeConfig.node_port_addresses read as kube-proxy reads its
// nodePortAddresses (keywords expanded as cmd/kube-proxy does, then
// per family as pkg/proxy/util.NewNodePortAddresses). At most one of
// All, and Addrs or Prefixes, is set; none set means no address serves
// node ports in this family.
type NodePorts struct {
	// All: every local address but loopback.
	All bool
	// Addrs are the node's primary address ("primary"): modes match it
	// as it is, as they always served the node's own address.
	Addrs []netip.Addr
	// Prefixes: every local address inside one of them. Loopback is cut
	// out of them already, so a mode needs no exception for it.
	Prefixes []netip.Prefix
}

// Matches reports whether node ports answer on the local address a; for
// modes that program one listener per known address (ipvs, userspace).
func (np NodePorts) Matches(a netip.Addr) bool {
	if a.IsLoopback() {
		return false
	}
	if np.All || slices.Contains(np.Addrs, a) {
		return true
	}
	return slices.ContainsFunc(np.Prefixes, func(p netip.Prefix) bool { return p.Contains(a) })
}

// readNodePorts reads a node_port_addresses list for family f; primary
// is the node's primary address of f (invalid when it has none). As in
// kube-proxy, a family the list names nothing of, or names the
// zero-length CIDR of, is served on every local address: "primary" on a
// node without an address of the family leaves the family open.
func readNodePorts(list []string, f dataplane.Family, primary netip.Addr, skip SkipFunc) NodePorts {
	var np NodePorts
	named := false
	for _, s := range list {
		switch s {
		case NodePortsAll:
			return NodePorts{All: true}
		case NodePortsPrimary:
			if primary.IsValid() && !primary.IsLoopback() && !slices.Contains(np.Addrs, primary) {
				np.Addrs = append(np.Addrs, primary)
				named = true
			}
			continue
		case NodePortsLocalhost:
			skip("", "node config: node port addresses: "+s+" is not served (loopback node ports need route_localnet)")
			continue
		}
		p, ok, err := f.ParsePrefix(s)
		switch {
		case err != nil:
			skip("", fmt.Sprintf("node config: node port addresses: %v", err))
			continue
		case !ok:
			continue
		case p.Bits() == 0:
			return NodePorts{All: true}
		}
		named = true
		kept := withoutLoopback(p)
		if len(kept) == 0 {
			skip("", fmt.Sprintf("node config: node port addresses: %s is loopback: not served (loopback node ports need route_localnet)", p))
		}
		for _, k := range kept {
			if !slices.Contains(np.Prefixes, k) {
				np.Prefixes = append(np.Prefixes, k)
			}
		}
	}
	if !named {
		return NodePorts{All: true}
	}
	return np
}

// loopback is the loopback range of each family.
var loopback = map[bool]netip.Prefix{
	true:  netip.MustParsePrefix("127.0.0.0/8"),
	false: netip.MustParsePrefix("::1/128"),
}

// withoutLoopback returns p with the loopback range cut out: p itself
// when they do not overlap, nothing when loopback holds p, else the
// halves of p, then of the half holding loopback, and so on, that lie
// outside it (at most p's 8 or 128 bits of them).
func withoutLoopback(p netip.Prefix) []netip.Prefix {
	lo := loopback[p.Addr().Is4()]
	if !p.Overlaps(lo) {
		return []netip.Prefix{p}
	}
	var out []netip.Prefix
	for p.Bits() < lo.Bits() {
		bits := p.Bits() + 1
		low := netip.PrefixFrom(p.Addr(), bits)
		high := netip.PrefixFrom(upperHalf(p), bits)
		if low.Overlaps(lo) {
			out, p = append(out, high), low
		} else {
			out, p = append(out, low), high
		}
	}
	slices.SortFunc(out, func(a, b netip.Prefix) int { return a.Addr().Compare(b.Addr()) })
	return out
}

// upperHalf is the first address of p's upper half: p's address with
// the bit after the prefix set.
func upperHalf(p netip.Prefix) netip.Addr {
	b := p.Addr().AsSlice()
	i := p.Bits()
	b[i/8] |= 0x80 >> (i % 8)
	a, _ := netip.AddrFromSlice(b)
	return a
}
