package explain

import (
	"fmt"
	"maps"
	"net/netip"
	"slices"

	"github.com/switchyard-proxy/switchyard/dataplane"
	"github.com/switchyard-proxy/switchyard/dataplane/serviceport"
)

// Mode names, as dataplane.Dataplane.Mode spells them.
const (
	ModeIPTables  = "iptables"
	ModeIPVS      = "ipvs"
	ModeNFTables  = "nftables"
	ModeUserspace = "userspace"
)

// Explain says what a node programmed from st in mode does with pkt.
// mode matters where kube-proxy's modes differ: the node port addresses
// an empty list means, the Service ranges only nftables guards, and the
// userspace proxy that always connects from the node. An unknown mode is
// read as iptables, the agent's default.
func Explain(st *dataplane.State, mode string, pkt Packet) Verdict {
	if err := pkt.Validate(); err != nil {
		return Verdict{Action: Pass, Why: WhyNotAService, Notes: []string{"not a packet a node can see: " + err.Error()}}
	}
	fam := dataplane.IPv4
	if pkt.IPv6() {
		fam = dataplane.IPv6
	}
	pkt.Src, pkt.Dst = pkt.Src.Unmap(), pkt.Dst.Unmap()
	tr := traitsOf(mode)
	npDefault := serviceport.NodePortsAll
	if tr.nodePortsPrimary {
		npDefault = serviceport.NodePortsPrimary
	}
	var nodeSkips []string
	node := serviceport.ReadNode(st.Config, fam, npDefault, func(_, reason string) { nodeSkips = append(nodeSkips, reason) })
	e := explainer{mode: mode, tr: tr, node: node, pkt: pkt}
	if tr.nodePortsEverywhereWithoutNodeIPs && len(node.NodeIPs) == 0 {
		other := dataplane.IPv6
		if fam == dataplane.IPv6 {
			other = dataplane.IPv4
		}
		e.noNodeIPs = len(serviceport.ReadNode(st.Config, other, npDefault, func(_, _ string) {}).NodeIPs) == 0
	}
	if pkt.Protocol == dataplane.SCTP && !tr.sctp {
		return Verdict{Action: Pass, Why: WhyNotAService, Notes: []string{mode + " mode: SCTP is not proxied (Go has no SCTP sockets)"}}
	}

	// Each view is read once, in name order; every pass below walks
	// what was read.
	keys := slices.Sorted(maps.Keys(st.Services))
	svcs := make([]readService, 0, len(keys))
	for _, k := range keys {
		var rs readService
		var ok bool
		rs.svc, ok = serviceport.Read(k, st.Services[k], fam, func(_, reason string) { rs.skips = append(rs.skips, reason) })
		if ok {
			svcs = append(svcs, rs)
		}
	}
	// kube-proxy matches service addresses before node ports (node ports
	// are the last rule of KUBE-SERVICES), so a node port is only looked
	// for once no service holds the address.
	for _, byNodePort := range []bool{false, true} {
		for i := range svcs {
			if v, ok := e.service(&svcs[i].svc, byNodePort); ok {
				for _, s := range svcs[i].skips {
					v.Notes = append(v.Notes, "skipped input of this service: "+s)
				}
				return v
			}
		}
	}
	v := e.notAService(svcs)
	for _, s := range nodeSkips {
		v.Notes = append(v.Notes, "skipped node setting: "+s)
	}
	return v
}

// readService is one view as serviceport read it, with what it skipped.
type readService struct {
	svc   serviceport.Service
	skips []string
}

type explainer struct {
	mode string
	tr   traits
	node serviceport.Node
	pkt  Packet
	// noNodeIPs: the NodeConfig has no usable node IP of either family
	// (only worked out for modes with nodePortsEverywhereWithoutNodeIPs).
	noNodeIPs bool
}

// fromNode reports whether the packet leaves from the node itself.
func (e *explainer) fromNode() bool {
	return e.pkt.Src.IsLoopback() || slices.Contains(e.node.NodeIPs, e.pkt.Src)
}

func (e *explainer) fromPod() bool {
	return slices.ContainsFunc(e.node.ClusterCIDRs, func(p netip.Prefix) bool { return p.Contains(e.pkt.Src) })
}

// service explains the packet by the first port of svc it is addressed
// to: by an address of the service, or by its node port.
func (e *explainer) service(svc *serviceport.Service, byNodePort bool) (Verdict, bool) {
	for i := range svc.Ports {
		p := &svc.Ports[i]
		if p.Protocol != e.pkt.Protocol {
			continue
		}
		v := Verdict{Service: svc.Name, Port: p.Name}
		switch {
		case byNodePort:
			if p.NodePort == 0 || uint32(e.pkt.Port) != p.NodePort {
				continue
			}
			v.Address = "node port"
			if e.pkt.Dst.IsLoopback() && e.tr.loopbackNodePortsRefused && !p.External.Serves() {
				v = e.refuse(p, p.External, v)
				v.Notes = append(v.Notes, e.mode+" mode: node ports are never forwarded on loopback, but the refusal of a port without endpoints matches every local address, as kube-proxy's")
				return v, true
			}
			if !e.nodePortAddress() {
				continue
			}
		case uint32(e.pkt.Port) != p.Port:
			continue
		case slices.Contains(p.ClusterIPs, e.pkt.Dst):
			v.Address = "cluster IP"
			return e.internal(p, v), true
		case slices.Contains(p.ExternalIPs, e.pkt.Dst):
			v.Address = "external IP"
		case slices.Contains(p.LBIPs, e.pkt.Dst):
			v.Address = "load-balancer IP"
			if p.HasRanges && !slices.ContainsFunc(p.SourceRanges, func(r netip.Prefix) bool { return r.Contains(e.pkt.Src) }) {
				if drop, note := e.outsideRanges(); drop {
					v.Action, v.Why = Drop, WhySourceRange
					v.Notes = append(v.Notes, fmt.Sprintf("source %s is outside the service's loadBalancerSourceRanges", e.pkt.Src))
					return v, true
				} else {
					v.Notes = append(v.Notes, note)
				}
			}
		default:
			continue
		}
		return e.external(p, v), true
	}
	return Verdict{}, false
}

// outsideRanges says whether a client outside a load-balancer IP's
// source ranges is dropped, or else why not.
func (e *explainer) outsideRanges() (bool, string) {
	switch {
	case !e.tr.sourceRanges:
		return false, e.mode + " mode: loadBalancerSourceRanges are not enforced (the proxy accepts every client)"
	case !e.tr.sourceRangesFromNode && e.fromNode():
		return false, e.mode + " mode: the node's own connections skip loadBalancerSourceRanges (IPVS takes them before the filter rule that checks them)"
	}
	return true, ""
}

// nodePortAddress reports whether node ports answer on the destination:
// one of the node's addresses the node port addresses cover.
func (e *explainer) nodePortAddress() bool {
	if e.noNodeIPs {
		// Loopback is the one local address a view without node IPs
		// names.
		return e.pkt.Dst.IsLoopback()
	}
	return slices.Contains(e.node.NodeIPs, e.pkt.Dst) && e.node.NodePorts.Matches(e.pkt.Dst)
}

// internal explains traffic to a cluster IP.
func (e *explainer) internal(p *serviceport.Port, v Verdict) Verdict {
	t := p.Internal
	if !t.Serves() {
		return e.refuse(p, t, v)
	}
	why := WhyEndpoints
	if t.Local {
		why = WhyLocalEndpoints
	}
	// Off-cluster clients are masqueraded whatever the policy (kube-proxy
	// writes the rule into its internal traffic chain): the reply must
	// come back through this node.
	masq := e.node.MasqueradeAll || (len(e.node.ClusterCIDRs) > 0 && !e.fromPod())
	return e.forward(p, t.Endpoints, t.Local, masq, why, v)
}

// external explains traffic to a node port, external IP or load-balancer
// IP.
func (e *explainer) external(p *serviceport.Port, v Verdict) Verdict {
	t := p.External
	short := p.ShortCircuit && e.tr.shortCircuit
	switch {
	case short && e.fromPod():
		return e.forward(p, p.Cluster, false, false, WhyShortCircuit, v)
	case short && e.fromNode():
		return e.forward(p, p.Cluster, false, true, WhyShortCircuit, v)
	case !t.Serves() && e.fromNode() && v.Address != "node port" && !e.tr.externalRefusedFromNode:
		v.Action, v.Why = Pass, WhyNotAService
		v.Notes = append(v.Notes, e.mode+" mode: no endpoint takes it, but the node's own packets to external addresses are checked only when they enter a node, as kube-proxy's; it leaves by the node's routes")
		return v
	case !t.Serves():
		return e.refuse(p, t, v)
	case t.Local:
		// Traffic from the node itself is masqueraded before it meets
		// the local endpoints (it has no other source to reply to).
		return e.forward(p, t.Endpoints, true, e.fromNode(), WhyLocalEndpoints, v)
	}
	return e.forward(p, t.Endpoints, false, true, WhyEndpoints, v)
}

// forward explains traffic eps take: the port's Local set when local,
// else its Cluster set.
func (e *explainer) forward(p *serviceport.Port, eps []serviceport.Endpoint, local, masq bool, why Why, v Verdict) Verdict {
	addrs := make([]netip.AddrPort, len(eps))
	terminating := 0
	for i, ep := range eps {
		addrs[i] = ep.Addr
		if ep.Terminating {
			terminating++
		}
	}
	v.Action, v.Endpoints, v.Why, v.AffinitySeconds = Forward, Even(addrs...), why, p.Affinity
	tab := p.ClusterTable
	if local {
		tab = p.LocalTable
	}
	v = e.balance(p, eps, tab, v)
	v.Masquerade = masq || e.tr.proxies
	if terminating == len(eps) {
		v.Notes = append(v.Notes, "terminating fallback: no endpoint is ready, so the serving terminating ones take the traffic")
	}
	if e.tr.proxies {
		v.Notes = append(v.Notes, e.mode+" mode: the proxy connects to the endpoint from the node, so the client's address never reaches it")
	}
	return v
}

// refuse explains traffic no endpoint takes.
func (e *explainer) refuse(p *serviceport.Port, t serviceport.Traffic, v Verdict) Verdict {
	if t.NoEndpoints == serviceport.Drop {
		v.Action, v.Why = Drop, WhyNoneForNode
		if e.tr.refusesInsteadOfDrop {
			v.Action = Reject
			v.Notes = append(v.Notes, e.mode+" mode: without an endpoint nothing listens, so the connection is refused, not dropped")
		}
		if t.Local {
			v.Notes = append(v.Notes, "the Local traffic policy allows only this node's endpoints, and it has none")
		}
		if e.tr.drainMeetsNodeFirst && e.fromNode() && v.Action == Drop {
			v.Notes = append(v.Notes, e.mode+" mode: while a removed endpoint's connections drain, its virtual server stays, "+
				"and the node's own connections meet it before the drop: they are refused until the drain ends")
		}
		return v
	}
	v.Action, v.Why = Reject, WhyNoEndpoints
	return v
}

// notAService explains a packet no service port holds: passed, except
// that the nftables mode guards the cluster's Service ranges as
// kube-proxy's does.
func (e *explainer) notAService(svcs []readService) Verdict {
	v := Verdict{Action: Pass, Why: WhyNotAService}
	switch {
	case e.tr.serviceAddrsLocal && e.isServiceAddr(svcs, true):
		v.Action, v.Why = Reject, WhyUnservedPort
		v.Notes = append(v.Notes, e.mode+" mode: service addresses are local (kube-ipvs0), and new connections to a port no service serves there are rejected")
	case e.tr.guardsServiceRanges && e.isServiceAddr(svcs, false):
		v.Action, v.Why = Reject, WhyUnservedPort
	case e.tr.guardsServiceRanges && slices.ContainsFunc(e.node.ServiceCIDRs, func(p netip.Prefix) bool { return p.Contains(e.pkt.Dst) }):
		v.Action, v.Why = Drop, WhyServiceRange
	}
	return v
}

// isServiceAddr reports whether the destination is a cluster IP of some
// service port or, with external, any of its addresses.
func (e *explainer) isServiceAddr(svcs []readService, external bool) bool {
	for _, rs := range svcs {
		for _, p := range rs.svc.Ports {
			if slices.Contains(p.ClusterIPs, e.pkt.Dst) ||
				external && (slices.Contains(p.ExternalIPs, e.pkt.Dst) || slices.Contains(p.LBIPs, e.pkt.Dst)) {
				return true
			}
		}
	}
	return false
}
