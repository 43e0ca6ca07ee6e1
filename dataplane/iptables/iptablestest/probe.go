package iptablestest

import (
	"net/netip"
	"slices"
	"strings"

	"github.com/switchyard-proxy/switchyard/dataplane"
	"github.com/switchyard-proxy/switchyard/dataplane/explain"
)

// Probes are packets worth asking a node programmed from st about: to
// every address and port of every service port, and to its node port on
// every node IP, each from a pod (the first cluster CIDR of the family),
// from the node, from the outside and from inside each load-balancer
// source range. A tracer and the explainer that disagree on one have
// found a mode that does not program what explain says. Input that does
// not parse is left out: the modes skip it, and so does the explainer.
func Probes(st *dataplane.State) []explain.Packet {
	var out []explain.Packet
	cfg := st.Config
	for _, k := range sortedNames(st) {
		sv := st.Services[k]
		srcs := probeSources(cfg.GetNodeIps(), cfg.GetClusterCidrs(), sv.GetLoadBalancerSourceRanges())
		var dsts []string
		for _, l := range [][]string{sv.GetClusterIps(), sv.GetExternalIps(), sv.GetLoadBalancerIps()} {
			dsts = append(dsts, l...)
		}
		for _, p := range sv.GetPorts() {
			proto := strings.ToLower(strings.TrimPrefix(p.GetProtocol().String(), "PROTOCOL_"))
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

func sortedNames(st *dataplane.State) []string {
	out := make([]string, 0, len(st.Services))
	for k := range st.Services {
		out = append(out, k)
	}
	slices.Sort(out)
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
