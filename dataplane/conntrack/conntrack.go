package conntrack

import (
	"context"
	"net/netip"
	"slices"

	"github.com/switchyard-proxy/switchyard/dataplane"
)

// Flow selects UDP conntrack entries to delete: those whose original
// destination is Dst (any address when NodePort is set: Dst's port on any
// node address) and, when Endpoint is valid, that were DNATed to it —
// address and port, as kube-proxy identifies an endpoint: a target port
// change keeps the pod's address and must still move its flows.
type Flow struct {
	Dst      netip.AddrPort
	NodePort bool
	Endpoint netip.AddrPort
}

// Cleaner deletes conntrack entries in the node's namespace. Netlink is
// the real one.
type Cleaner interface {
	DeleteUDP(ctx context.Context, fam dataplane.Family, flows []Flow) error
}

// UDPPort is what cleanup needs to know about one programmed UDP service
// port: the addresses clients use and the endpoints traffic goes to.
type UDPPort struct {
	Dsts      []netip.AddrPort // cluster, external and load-balancer IPs with the port
	NodePort  uint16
	Endpoints []netip.AddrPort
}

// AddEndpoint records a, once.
func (u *UDPPort) AddEndpoint(a netip.AddrPort) {
	if !slices.Contains(u.Endpoints, a) {
		u.Endpoints = append(u.Endpoints, a)
	}
}

// Stale compares the UDP ports of two programmed states, keyed by a stable
// port identity: entries DNATed to an endpoint that went away must go, and
// so must entries to a port that had no endpoints or did not exist (cached
// unreplied, never DNATed: a client that sent before its Service existed
// would stay cut off while it keeps sending) and now has some. prev is nil
// on a dataplane's first sync, which clears nothing: after an agent
// restart every port looks new, and its established flows must survive.
// The result is in key order.
func Stale(prev, next map[string]UDPPort) []Flow {
	var out []Flow
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
		old := prev[id]
		cur := next[id]
		for _, ep := range old.Endpoints {
			if slices.Contains(cur.Endpoints, ep) {
				continue
			}
			for _, d := range old.Dsts {
				out = append(out, Flow{Dst: d, Endpoint: ep})
			}
			if old.NodePort != 0 {
				out = append(out, Flow{Dst: netip.AddrPortFrom(netip.Addr{}, old.NodePort), NodePort: true, Endpoint: ep})
			}
		}
		if prev != nil && len(old.Endpoints) == 0 && len(cur.Endpoints) > 0 {
			for _, d := range cur.Dsts {
				out = append(out, Flow{Dst: d})
			}
			if cur.NodePort != 0 {
				out = append(out, Flow{Dst: netip.AddrPortFrom(netip.Addr{}, cur.NodePort), NodePort: true})
			}
		}
	}
	return out
}
