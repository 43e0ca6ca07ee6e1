package iptables

import (
	"net/netip"

	"github.com/switchyard-proxy/switchyard/dataplane/conntrack"
)

// recordUDP notes a rendered UDP port for conntrack cleanup.
func (r *renderer) recordUDP(p *portPlan) {
	if p.proto != "udp" {
		return
	}
	u := conntrack.UDPPort{NodePort: uint16(p.nodePort)}
	for _, list := range [][]netip.Addr{p.clusterIPs, p.externalIPs, p.lbIPs} {
		for _, a := range list {
			u.Dsts = append(u.Dsts, netip.AddrPortFrom(a, uint16(p.port)))
		}
	}
	for _, eps := range [][]endpoint{p.cluster, p.local} {
		for _, ep := range eps {
			u.AddEndpoint(ep.addr.Addr())
		}
	}
	r.rs.udp[p.id] = u
}
