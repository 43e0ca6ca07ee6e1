package iptables

import (
	"context"
	"net/netip"
	"slices"
)

// udpPort is what conntrack cleanup needs to know about one UDP service
// port after rendering: the addresses clients use and the endpoints used.
type udpPort struct {
	dsts      []netip.AddrPort // cluster, external and load-balancer IPs with the port
	nodePort  uint16
	endpoints []netip.Addr
}

// StaleFlow selects UDP conntrack entries to delete: those whose original
// destination is Dst (any address when NodePort is set: Dst's port on any
// node address) and, when Endpoint is valid, that were DNATed to it.
type StaleFlow struct {
	Dst      netip.AddrPort
	NodePort bool
	Endpoint netip.Addr
}

// Conntrack deletes conntrack entries in the node's namespace. The real
// one (NewNetlinkConntrack) uses netlink; nil disables cleanup.
type Conntrack interface {
	DeleteUDP(ctx context.Context, fam Family, flows []StaleFlow) error
}

// recordUDP notes a rendered UDP port for conntrack cleanup.
func (r *renderer) recordUDP(p *portPlan) {
	if p.proto != "udp" {
		return
	}
	u := udpPort{nodePort: uint16(p.nodePort)}
	for _, list := range [][]netip.Addr{p.clusterIPs, p.externalIPs, p.lbIPs} {
		for _, a := range list {
			u.dsts = append(u.dsts, netip.AddrPortFrom(a, uint16(p.port)))
		}
	}
	for _, eps := range [][]endpoint{p.cluster, p.local} {
		for _, ep := range eps {
			if !slices.Contains(u.endpoints, ep.addr.Addr()) {
				u.endpoints = append(u.endpoints, ep.addr.Addr())
			}
		}
	}
	r.rs.udp[p.id] = u
}

// staleFlows compares the UDP ports of two rulesets: entries DNATed to an
// endpoint that went away must go, and so must entries to a port that had
// no endpoints (cached unreplied, never DNATed) and now has some.
func staleFlows(prev, next map[string]udpPort) []StaleFlow {
	var out []StaleFlow
	ids := make([]string, 0, len(prev)+len(next))
	for id := range prev {
		ids = append(ids, id)
	}
	for id := range next {
		if _, ok := prev[id]; !ok {
			ids = append(ids, id)
		}
	}
	slices.Sort(ids)
	for _, id := range ids {
		old, hadOld := prev[id]
		cur := next[id]
		for _, ep := range old.endpoints {
			if slices.Contains(cur.endpoints, ep) {
				continue
			}
			for _, d := range old.dsts {
				out = append(out, StaleFlow{Dst: d, Endpoint: ep})
			}
			if old.nodePort != 0 {
				out = append(out, StaleFlow{Dst: netip.AddrPortFrom(netip.Addr{}, old.nodePort), NodePort: true, Endpoint: ep})
			}
		}
		if hadOld && len(old.endpoints) == 0 && len(cur.endpoints) > 0 {
			for _, d := range cur.dsts {
				out = append(out, StaleFlow{Dst: d})
			}
			if cur.nodePort != 0 {
				out = append(out, StaleFlow{Dst: netip.AddrPortFrom(netip.Addr{}, cur.nodePort), NodePort: true})
			}
		}
	}
	return out
}
