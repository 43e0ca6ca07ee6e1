package scenario

import (
	"net/netip"
	"slices"
	"strings"

	"github.com/switchyard-proxy/switchyard/dataplane"
	"github.com/switchyard-proxy/switchyard/dataplane/explain"
	"github.com/switchyard-proxy/switchyard/dataplane/internal/sorted"
)

// Probes are packets worth asking a node programmed from st about: to
// every address and port of every service port, and to its node port on
// every node IP, each from a pod (the first cluster CIDR of the family),
// from the node, from the outside and from inside each load-balancer
// source range. A tracer and the explainer that disagree on one have
// found a mode that does not program what explain says. Input that does
// not parse is left out: the modes skip it, and so does the explainer.
// WideProbes asks about more.
func Probes(st *dataplane.State) []explain.Packet {
	var out []explain.Packet
	cfg := st.Config
	for _, k := range sorted.Keys(st.Services) {
		sv := st.Services[k]
		srcs := probeSources(cfg.GetNodeIps(), cfg.GetClusterCidrs(), sv.GetLoadBalancerSourceRanges())
		var dsts []string
		for _, l := range [][]string{sv.GetClusterIps(), sv.GetExternalIps(), sv.GetLoadBalancerIps()} {
			dsts = append(dsts, l...)
		}
		for _, p := range sv.GetPorts() {
			proto, _ := dataplane.ProtocolOf(p.GetProtocol()) // 0 for none: Validate drops its packets
			add := func(dst string, port uint32) {
				d, err := netip.ParseAddr(dst)
				if err != nil || port == 0 || port > 65535 {
					return
				}
				for _, s := range srcs {
					pkt := explain.Packet{Protocol: proto, Src: s, Dst: d, Port: uint16(port)}
					if pkt.Validate() == nil && !slices.Contains(out, pkt) {
						out = append(out, pkt)
					}
				}
			}
			for _, d := range dsts {
				add(d, p.GetPort())
			}
			for _, n := range cfg.GetNodeIps() {
				add(n, p.GetNodePort())
			}
		}
	}
	return out
}

// probeSources are the clients of both families: Validate drops the
// packets whose source is of the other family.
func probeSources(nodeIPs, clusterCIDRs, ranges []string) []netip.Addr {
	out := []netip.Addr{netip.MustParseAddr("192.0.2.50"), netip.MustParseAddr("2001:db8::50")}
	for _, n := range nodeIPs {
		if a, err := netip.ParseAddr(n); err == nil {
			out = append(out, a)
		}
	}
	pods := map[bool]bool{}
	for _, c := range clusterCIDRs {
		if p, err := netip.ParsePrefix(c); err == nil && !pods[p.Addr().Is4()] {
			pods[p.Addr().Is4()] = true
			out = append(out, nth(p, 5))
		}
	}
	for _, r := range ranges {
		if p, err := netip.ParsePrefix(r); err == nil {
			out = append(out, nth(p, 1))
		}
	}
	return out
}

// nth is the n-th address of p (p itself for a host prefix).
func nth(p netip.Prefix, n int) netip.Addr {
	a := p.Masked().Addr()
	for range n {
		if next := a.Next(); p.Contains(next) {
			a = next
		}
	}
	return a
}

// WideProbes are the packets Probes misses around st's services as well:
// to each service address on the next port and with the other protocol
// (tcp for udp and sctp), to the first addresses of the service CIDRs
// and to node ports on loopback, from loopback and from every endpoint
// too. Those are the packets a mode must leave alone, reject or drop as
// the explainer says, where the modes' traits differ most.
func WideProbes(st *dataplane.State) []explain.Packet {
	srcs, targets := wideProbeEnds(st)
	var out []explain.Packet
	seen := map[string]bool{}
	for _, tg := range targets {
		for _, src := range srcs {
			pkt := explain.Packet{Protocol: tg.Protocol, Src: src, Dst: tg.Dst, Port: tg.Port}
			if pkt.Validate() != nil || seen[pkt.String()] {
				continue
			}
			seen[pkt.String()] = true
			out = append(out, pkt)
		}
	}
	// The services come from a map: sorted, the logs of two runs compare
	// line by line.
	slices.SortFunc(out, func(a, b explain.Packet) int { return strings.Compare(a.String(), b.String()) })
	return out
}

// wideProbeEnds are WideProbes' sources and destinations (packets
// without a source); every source goes to every destination.
func wideProbeEnds(st *dataplane.State) (srcs []netip.Addr, targets []explain.Packet) {
	loopback := parseAddrs("127.0.0.1", "::1")
	nodeIPs := parseAddrs(st.Config.GetNodeIps()...)
	srcs = slices.Concat(parseAddrs("192.0.2.50", "2001:db8::50"), loopback, nodeIPs, fifthAddrs(st.Config.GetClusterCidrs()))
	for _, a := range fifthAddrs(st.Config.GetServiceCidrs()) {
		targets = append(targets, explain.Packet{Protocol: dataplane.TCP, Dst: a, Port: 80})
	}
	for _, sv := range st.Services {
		srcs = append(srcs, fifthAddrs(sv.GetLoadBalancerSourceRanges())...)
		for _, ep := range sv.GetClusterEndpoints() {
			srcs = append(srcs, parseAddrs(ep.GetAddress())...)
		}
		svcIPs := parseAddrs(slices.Concat(sv.GetClusterIps(), sv.GetExternalIps(), sv.GetLoadBalancerIps())...)
		for _, p := range sv.GetPorts() {
			proto, _ := dataplane.ProtocolOf(p.GetProtocol()) // 0 for none: Validate drops its packets
			other := map[dataplane.Protocol]dataplane.Protocol{dataplane.TCP: dataplane.UDP, dataplane.UDP: dataplane.TCP, dataplane.SCTP: dataplane.TCP}[proto]
			// port+1 may wrap to 0: Validate drops that packet.
			port := uint16(p.GetPort())
			for _, a := range svcIPs {
				targets = append(targets,
					explain.Packet{Protocol: proto, Dst: a, Port: port},
					explain.Packet{Protocol: proto, Dst: a, Port: port + 1},
					explain.Packet{Protocol: other, Dst: a, Port: port})
			}
			if np := uint16(p.GetNodePort()); np > 0 {
				for _, a := range slices.Concat(loopback, nodeIPs) {
					targets = append(targets, explain.Packet{Protocol: proto, Dst: a, Port: np})
				}
			}
		}
	}
	return srcs, targets
}

// parseAddrs are the addresses of ss that parse, unmapped.
func parseAddrs(ss ...string) []netip.Addr {
	var out []netip.Addr
	for _, s := range ss {
		if a, err := netip.ParseAddr(s); err == nil {
			out = append(out, a.Unmap())
		}
	}
	return out
}

// fifthAddrs are the fifth addresses after each prefix of ss that
// parses, counted from the address as written.
func fifthAddrs(ss []string) []netip.Addr {
	var out []netip.Addr
	for _, s := range ss {
		if p, err := netip.ParsePrefix(s); err == nil {
			out = append(out, p.Addr().Next().Next().Next().Next().Next())
		}
	}
	return out
}
