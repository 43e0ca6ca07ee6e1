package userspace

import (
	"fmt"
	"net/netip"
	"slices"
	"time"

	"github.com/switchyard-proxy/switchyard/dataplane"
	"github.com/switchyard-proxy/switchyard/dataplane/explain"
	"github.com/switchyard-proxy/switchyard/dataplane/internal/sorted"
	"github.com/switchyard-proxy/switchyard/dataplane/serviceport"
)

// Frontends is what the mode programs for a State, as Trace reads it:
// the listeners it opens and the frontends it plans without one.
type Frontends struct {
	// Listeners are the open frontends: Dataplane.Listeners for what a
	// Dataplane holds, or Planned's for what Apply would open.
	Listeners []Listener
	// Unserved are the frontends whose traffic has no endpoint.
	Unserved []Unserved
}

// Unserved is a frontend the plan gives no socket, because its decided
// endpoint set is empty: where its address is local the kernel refuses
// clients (a TCP reset, ICMP port unreachable for UDP).
type Unserved struct {
	Protocol dataplane.Protocol
	Frontend netip.AddrPort
}

// Planned returns the frontends Apply programs for st, without I/O. Its
// Listeners are bound to their frontends (as with BindServiceAddress) and
// have no active connection. Planned reads st as Apply does, so a
// Dataplane that applied st holds the same listeners, Bound and Active
// aside; a Dataplane does not keep the unserved frontends, so they come
// from here.
func Planned(st *dataplane.State) Frontends {
	p := plan(st)
	var fs Frontends
	for _, k := range sorted.KeysFunc(p.fronts, frontendKey.compare) {
		f := p.fronts[k]
		fs.Listeners = append(fs.Listeners, Listener{
			Service: f.service, Port: f.port, Kind: f.kind, Protocol: k.proto,
			Frontend: k.addr, Bound: k.addr, Backends: slices.Clone(f.backends), Affinity: f.affinity,
			Algorithm: f.hash.alg, Table: f.hash.table,
		})
	}
	for _, k := range p.empty {
		fs.Unserved = append(fs.Unserved, Unserved{Protocol: k.proto, Frontend: k.addr})
	}
	return fs
}

// addressOf names a frontend kind as explain.Verdict.Address does.
var addressOf = map[Kind]string{
	KindClusterIP:      "cluster IP",
	KindExternalIP:     "external IP",
	KindLoadBalancerIP: "load-balancer IP",
	KindNodePort:       "node port",
}

// Trace says what a node running this mode with fs does with the first
// packet of a connection, from the sockets alone: a packet reaches a
// listener on its destination address and port, else one on the
// wildcard address of its family and that port (the kernel prefers the
// specific bind). It assumes the packet is delivered locally, as the
// mode's setup makes service addresses (a local route, or the redirect
// rules of a local-port listener).
//
//   - A listener forwards to its backends in even shares (strict round
//     robin, doc.go), always masqueraded: the proxy connects from the
//     node, whatever the client's address. With a hashed algorithm it
//     forwards to the one backend its table names for the client (the
//     packet's source port too, for maglev), or, without the port, to
//     each backend with its share of the table's slots.
//   - An unserved frontend is rejected: nothing listens there.
//   - Anything else is passed: the mode has no socket for it (SCTP, a
//     port or address no service has).
//
// Nothing is dropped: the plan has no source ranges, and a Local policy
// without a local endpoint leaves the frontend unserved, so refused
// rather than dropped (doc.go). (UDP datagrams of new clients beyond
// MaxUDPSessions are dropped, a load limit no plan shows.)
//
// Why is left empty: a socket does not say which policy chose its
// backends.
func Trace(fs Frontends, pkt explain.Packet) explain.Verdict {
	if err := pkt.Validate(); err != nil {
		return explain.Verdict{Action: explain.Pass, Path: []string{"not a packet a node can see: " + err.Error()}}
	}
	proto := pkt.Protocol
	dst := netip.AddrPortFrom(pkt.Dst.Unmap(), pkt.Port)
	wildcard := netip.AddrPortFrom(netip.IPv4Unspecified(), pkt.Port)
	if dst.Addr().Is6() {
		wildcard = netip.AddrPortFrom(netip.IPv6Unspecified(), pkt.Port)
	}
	for _, at := range []netip.AddrPort{dst, wildcard} {
		i := slices.IndexFunc(fs.Listeners, func(l Listener) bool { return l.Protocol == proto && unmapPort(l.Frontend) == at })
		if i >= 0 {
			return forward(fs.Listeners[i], pkt)
		}
	}
	for _, at := range []netip.AddrPort{dst, wildcard} {
		if slices.Contains(fs.Unserved, Unserved{Protocol: proto, Frontend: at}) {
			return explain.Verdict{Action: explain.Reject,
				Path: []string{fmt.Sprintf("%s/%s: planned without endpoints, no listener: refused", proto, at)}}
		}
	}
	return explain.Verdict{Action: explain.Pass, Path: []string{fmt.Sprintf("%s/%s: no listener", proto, dst)}}
}

// forward is the verdict of a packet accepted by l.
func forward(l Listener, pkt explain.Packet) explain.Verdict {
	path := []string{fmt.Sprintf("%s listener %s (%s %s)", l.Protocol, l.Frontend, l.Kind, l.Service)}
	if l.Bound != l.Frontend {
		path = append(path, "bound "+l.Bound.String())
	}
	v := explain.Verdict{Service: l.Service, Port: l.Port, Address: addressOf[l.Kind], Path: path}
	if len(l.Backends) == 0 {
		// Not planned (an empty frontend gets no socket), but a listener
		// without a backend would accept and reset at once.
		v.Action = explain.Reject
		v.Path = append(v.Path, "no backend: reset")
		return v
	}
	v.Action, v.Endpoints, v.Masquerade = explain.Forward, explain.Even(l.Backends...), true
	v.AffinitySeconds = uint32(l.Affinity / time.Second)
	switch {
	case l.Table != nil && (pkt.SrcPort != 0 || l.Algorithm == serviceport.SourceHash):
		i := l.Table.Pick(l.Algorithm, netip.AddrPortFrom(pkt.Src, pkt.SrcPort))
		v.Endpoints = []explain.Share{{Endpoint: l.Backends[i], Share: 1}}
		v.Path = append(v.Path, fmt.Sprintf("%s table of %d slots: %s", l.Algorithm, len(l.Table.Slots), l.Backends[i]))
	case l.Table != nil:
		v.Endpoints = explain.TableShares(l.Table, l.Backends)
		v.Path = append(v.Path, fmt.Sprintf("%s table of %d slots over %d backends", l.Algorithm, len(l.Table.Slots), len(l.Backends)))
	default:
		v.Path = append(v.Path, fmt.Sprintf("round robin over %d backends", len(l.Backends)))
	}
	v.Notes = []string{"userspace mode: the proxy connects to the backend from the node, so the client's address never reaches it"}
	return v
}
