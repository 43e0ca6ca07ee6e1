package conntrack

import (
	"net/netip"
	"slices"
)

// Entry is one UDP conntrack entry of one family, as the reconciler reads
// it. Addresses are unmapped (an IPv4-mapped IPv6 address is IPv4).
type Entry struct {
	// Src and Dst are the original direction's source and destination:
	// the client and the address it sent to.
	Src, Dst netip.AddrPort
	// Reply is the reply direction's source: the DNAT target, or Dst
	// itself when the flow was not DNATed.
	Reply netip.AddrPort
}

// DNATed reports whether the entry's destination was translated.
func (e Entry) DNATed() bool { return e.Reply != e.Dst }

// Reason says why an entry is stale; its values are the reason label of
// the reconciler's deleted-entries metric.
type Reason string

const (
	// EndpointGone: DNATed to an address:port that is no longer an
	// endpoint of the service port its destination names, while the
	// port has others.
	EndpointGone Reason = "endpoint_gone"
	// NoEndpoints: DNATed to an endpoint of a port that has none now
	// (scaled to zero): the REJECT such a port gets never sees the
	// flow, which conntrack keeps steering to the old endpoint as long
	// as the client sends (kubernetes#139628).
	NoEndpoints Reason = "no_endpoints"
	// ServiceGone: DNATed, to a destination inside a Service IP range
	// that no live port has any more (the Service was deleted).
	ServiceGone Reason = "service_gone"
	// NotNATed: not DNATed, to a port that has endpoints now: cached
	// while the port had none or its rules did not exist yet (a client
	// that sent before the agent programmed the node), and kept
	// unanswered while the client keeps sending (kubernetes#126468).
	NotNATed Reason = "not_nated"
)

// Deletion is a stale entry and why it must go.
type Deletion struct {
	Entry  Entry
	Reason Reason
}

// Live is what the node must forward, for one family: the UDP service
// ports the agent applied last and where they answer.
type Live struct {
	// Ports are the applied UDP service ports (UDPPort of each).
	Ports []UDPPort
	// NodePortAddr reports whether node ports answer on the local
	// address a; nil: on none. An entry to another address is never a
	// node-port entry, however its port reads: a flow from this node to
	// another node's node port is not DNATed here, and host ports are
	// DNATed on node addresses by other software.
	NodePortAddr func(a netip.Addr) bool
	// ServiceCIDRs are the cluster's Service IP ranges: a DNATed entry
	// to one of their addresses that no live port has is a deleted
	// Service's. Nothing else DNATs these addresses.
	ServiceCIDRs []netip.Prefix
}

// livePort is one port's endpoint set, indexed for lookups at 100k
// entries.
type livePort struct {
	endpoints map[netip.AddrPort]struct{}
}

func (p *livePort) add(u UDPPort) {
	for _, ep := range u.Endpoints {
		p.endpoints[ep] = struct{}{}
	}
}

// index maps service addresses and node ports to their ports. Two ports
// claiming one address (never from a valid view) share one endpoint set:
// a flow to either endpoint is kept.
type index struct {
	byDst      map[netip.AddrPort]*livePort
	byNodePort map[uint16]*livePort
}

func newIndex(ports []UDPPort) index {
	ix := index{byDst: map[netip.AddrPort]*livePort{}, byNodePort: map[uint16]*livePort{}}
	get := func(m map[netip.AddrPort]*livePort, k netip.AddrPort) *livePort {
		p, ok := m[k]
		if !ok {
			p = &livePort{endpoints: map[netip.AddrPort]struct{}{}}
			m[k] = p
		}
		return p
	}
	for _, u := range ports {
		for _, d := range u.Dsts {
			get(ix.byDst, netip.AddrPortFrom(d.Addr().Unmap(), d.Port())).add(u)
		}
		if u.NodePort != 0 {
			p, ok := ix.byNodePort[u.NodePort]
			if !ok {
				p = &livePort{endpoints: map[netip.AddrPort]struct{}{}}
				ix.byNodePort[u.NodePort] = p
			}
			p.add(u)
		}
	}
	return ix
}

// port returns the live port e's destination names, nil for none.
func (ix index) port(e Entry, nodePortAddr func(netip.Addr) bool) *livePort {
	if p, ok := ix.byDst[e.Dst]; ok {
		return p
	}
	if nodePortAddr == nil {
		return nil
	}
	if p, ok := ix.byNodePort[e.Dst.Port()]; ok && nodePortAddr(e.Dst.Addr()) {
		return p
	}
	return nil
}

// Reconcile compares the UDP conntrack entries of one family with what
// the node must forward and returns the entries to delete, in input
// order. Its rules:
//   - an entry DNATed to an address:port that is not an endpoint of the
//     port its destination names goes (EndpointGone, NoEndpoints): an
//     endpoint is an address and a port, as kube-proxy's, so a changed
//     target port moves the flow too;
//   - an entry DNATed to a Service range address no port has any more
//     goes (ServiceGone);
//   - an entry not DNATed to a port that has endpoints goes (NotNATed);
//   - anything else stays: entries whose destination is no service
//     address or node port of ours (another program's DNAT, host ports,
//     the node's own traffic), entries to a deleted Service's external
//     addresses or node port (not ours to judge without the Service;
//     the change-based cleanup, Stale, covers those while the agent
//     runs), and un-NATed entries to a port without endpoints (the
//     port's REJECT or DROP needs no entry, and deleting it changes
//     nothing until the port has endpoints, when it goes).
//
// TCP is never looked at (the caller lists UDP only): a TCP connection
// to a gone endpoint is reset or times out and the client reconnects,
// with a new entry, as kube-proxy reasons.
func Reconcile(entries []Entry, live Live) []Deletion {
	ix := newIndex(live.Ports)
	var out []Deletion
	for _, e := range entries {
		if r, stale := judge(ix, e, live); stale {
			out = append(out, Deletion{Entry: e, Reason: r})
		}
	}
	return out
}

func judge(ix index, e Entry, live Live) (Reason, bool) {
	p := ix.port(e, live.NodePortAddr)
	if p == nil {
		if e.DNATed() && slices.ContainsFunc(live.ServiceCIDRs, func(c netip.Prefix) bool { return c.Contains(e.Dst.Addr()) }) {
			return ServiceGone, true
		}
		return "", false
	}
	if !e.DNATed() {
		return NotNATed, len(p.endpoints) > 0
	}
	if _, ok := p.endpoints[e.Reply]; ok {
		return "", false
	}
	if len(p.endpoints) == 0 {
		return NoEndpoints, true
	}
	return EndpointGone, true
}
