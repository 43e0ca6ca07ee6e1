package iptables

import (
	"fmt"
	"net/netip"

	"github.com/switchyard-proxy/switchyard/dataplane"
	"github.com/switchyard-proxy/switchyard/dataplane/serviceport"
	switchyardv1 "github.com/switchyard-proxy/switchyard/proto/switchyard/v1"
)

// endpoint is one backend of one service port in one family.
type endpoint struct {
	addr  netip.AddrPort
	chain string // KUBE-SEP-…, "" when the port has no KUBE-SEP chains
}

// portPlan is one service port as serviceport read it, with what the
// iptables rules add: chain-name identity, the protocol match and the
// endpoints with their KUBE-SEP chains.
type portPlan struct {
	sp             *serviceport.Port
	id             string // identity (portID)
	key            string // hashed into chain names, as kube-proxy (portHashKey)
	match          string // "-p tcp -m tcp"
	cluster, local []endpoint
}

// service renders every port of one view.
func (r *renderer) service(key string, sv *switchyardv1.ServiceView) {
	svc, ok := serviceport.Read(key, sv, dataplane.Family(r.fam), func(service, reason string) {
		r.rs.Skips = append(r.rs.Skips, dataplane.Skip{Service: service, Reason: reason})
	})
	if !ok {
		return
	}
	if hc := svc.HealthCheckNodePort; hc > 0 {
		r.rs.add(tableFilter, chainNodePorts, comment(svc.Name+" health check node port"),
			fmt.Sprintf("-p tcp -m tcp --dport %d -j ACCEPT", hc))
	}
	for i := range svc.Ports {
		sp := &svc.Ports[i]
		if a := sp.Algorithm; a.Hashed() || a == serviceport.RoundRobin {
			// Hashing needs a lookup table no xtables match can index;
			// round robin (statistic --mode nth) is left out, as every
			// restore of the chain would reset its counters.
			r.rs.Skips = append(r.rs.Skips, dataplane.Skip{Service: svc.Name,
				Reason: fmt.Sprintf("port %q: %s is not available in the iptables mode: random", sp.Name, a)})
		}
		p := portPlan{sp: sp, id: portID(svc.Namespace, svc.ServiceName, sp.Name, sp.Protocol),
			key:   portHashKey(svc.Namespace, svc.ServiceName, sp.Name, sp.Protocol),
			match: "-p " + sp.Protocol.String() + " -m " + sp.Protocol.String()}
		seps := usesSEPs(&p)
		p.cluster = endpointsOf(p.key, sp.Cluster, seps)
		p.local = endpointsOf(p.key, sp.Local, seps)
		r.port(&p)
	}
}

// usesSEPs reports whether a port's endpoints get KUBE-SEP chains: only
// with ClientIP affinity, whose -m recent lists need a name per endpoint
// (doc.go, "Why no KUBE-SEP chains").
func usesSEPs(p *portPlan) bool { return p.sp.Affinity > 0 }

// endpointsOf lists the endpoints of one service port, naming their
// KUBE-SEP chains when they have one (a hash per endpoint, so skipped
// when not needed).
func endpointsOf(key string, eps []serviceport.Endpoint, seps bool) []endpoint {
	out := make([]endpoint, 0, len(eps))
	for _, ep := range eps {
		e := endpoint{addr: ep.Addr}
		if seps {
			e.chain = sepChain(key, ep.Addr)
		}
		out = append(out, e)
	}
	return out
}

func comment(s string) string { return `-m comment --comment "` + s + `"` }

// port renders one service port as serviceport decided it: its entry
// rules (shards, node ports, filter rejects and drops) and its chains.
func (r *renderer) port(p *portPlan) {
	sp := p.sp
	svc, svl, ext, fw := svcChain(p.key), svlChain(p.key), extChain(p.key), fwChain(p.key)
	intChain := svc
	if sp.Internal.Local {
		intChain = svl
	}
	dport := fmt.Sprintf("--dport %d", sp.Port)

	for _, ip := range sp.ClusterIPs {
		if sp.Internal.Serves() {
			r.toShard(ip, join(comment(sp.Label+" cluster IP"), p.match, "-d", ip.String(), dport, "-j", intChain))
		} else {
			r.rs.add(tableFilter, chainServices, comment(sp.Label+" has no endpoints for internal traffic"),
				p.match, "-d", ip.String(), dport, "-j", filterTarget(sp.Internal.NoEndpoints, sp.Protocol))
		}
	}
	r.external(p, "external IP", sp.ExternalIPs, ext)
	lbTarget := ext
	if sp.HasRanges {
		lbTarget = fw
		for _, ip := range sp.LBIPs {
			r.rs.add(tableFilter, chainFirewall, comment(sp.Label+" traffic not accepted by "+fw),
				p.match, "-d", ip.String(), dport, "-j DROP")
		}
	}
	r.external(p, "loadbalancer IP", sp.LBIPs, lbTarget)
	if sp.NodePort > 0 {
		np := fmt.Sprintf("--dport %d", sp.NodePort)
		if sp.UsesExternal() {
			r.rs.add(tableNAT, chainNodePorts, comment(sp.Label), p.match, np, "-j", ext)
		}
		if !sp.External.Serves() {
			r.rs.add(tableFilter, chainExternalServices, comment(sp.Label+" has no endpoints for external traffic"),
				"-m addrtype --dst-type LOCAL", p.match, np, "-j", filterTarget(sp.External.NoEndpoints, sp.Protocol))
		}
	}

	if len(p.cluster) > 0 {
		r.clusterChain(p, svc)
	}
	if sp.UsesLocal() {
		if sp.Internal.Local {
			r.clusterIPMasq(p, svl)
		}
		r.balance(p, svl, p.local)
	}
	if sp.UsesExternal() {
		r.extChain(p, ext, svc, svl)
		if sp.HasRanges && len(sp.LBIPs) > 0 {
			r.rs.chain(tableNAT, fw)
			for _, src := range sp.SourceRanges {
				r.rs.add(tableNAT, fw, comment(sp.Label+" loadbalancer IP"), "-s", src.String(), "-j", ext)
			}
		}
	}
	r.seps(p, p.cluster)
	if sp.UsesLocal() {
		r.seps(p, p.local)
	}
	if u, ok := sp.UDPFlows(); ok {
		r.rs.udp[p.id] = u
	}
}

// filterTarget is the filter verdict for traffic no endpoint takes.
func filterTarget(v serviceport.Verdict, proto dataplane.Protocol) string {
	switch {
	case v == serviceport.Drop:
		return "DROP"
	case proto == dataplane.TCP:
		// An ICMP error to a connect() on this node arrives while the
		// socket is locked and only takes effect at the SYN retransmit
		// (1–2 s, measured); a RST refuses at once on every path.
		return "REJECT --reject-with tcp-reset"
	}
	return "REJECT"
}

// external writes the entry rules of external or load-balancer addresses:
// into the shards when KUBE-EXT is used, and a filter REJECT/DROP when no
// endpoint takes external traffic. Under a Local policy without local
// endpoints there are both: KUBE-EXT short-circuits node and pod traffic,
// and what it does not DNAT meets the filter DROP (which never sees what
// KUBE-EXT DNATed, its destination no longer being the service's).
func (r *renderer) external(p *portPlan, kind string, ips []netip.Addr, target string) {
	sp := p.sp
	dport := fmt.Sprintf("--dport %d", sp.Port)
	for _, ip := range ips {
		if sp.UsesExternal() {
			r.toShard(ip, join(comment(sp.Label+" "+kind), p.match, "-d", ip.String(), dport, "-j", target))
		}
		if !sp.External.Serves() {
			r.rs.add(tableFilter, chainExternalServices, comment(sp.Label+" has no endpoints for external traffic"),
				p.match, "-d", ip.String(), dport, "-j", filterTarget(sp.External.NoEndpoints, sp.Protocol))
		}
	}
}

// clusterChain writes KUBE-SVC: masquerade off-cluster sources of the
// cluster IPs when internal traffic uses it, then balance over the
// cluster endpoints.
func (r *renderer) clusterChain(p *portPlan, svc string) {
	r.rs.chain(tableNAT, svc)
	if !p.sp.Internal.Local {
		r.clusterIPMasq(p, svc)
	}
	r.balance(p, svc, p.cluster)
}

// clusterIPMasq writes into the chain internal traffic takes (KUBE-SVC,
// or KUBE-SVL under internalTrafficPolicy Local, as kube-proxy writes
// them into its internal traffic chain) the masquerade of off-cluster
// sources of the cluster IPs, so replies come back through this node.
// Only the cluster IPs match: external traffic through KUBE-SVL is not
// affected.
func (r *renderer) clusterIPMasq(p *portPlan, chain string) {
	r.rs.chain(tableNAT, chain)
	dport := fmt.Sprintf("--dport %d", p.sp.Port)
	for _, ip := range p.sp.ClusterIPs {
		c := comment(p.sp.Label + " cluster IP")
		switch cidrs := r.node.ClusterCIDRs; {
		case r.node.MasqueradeAll:
			r.rs.add(tableNAT, chain, c, p.match, "-d", ip.String(), dport, "-j", chainMarkMasq)
		case len(cidrs) == 1:
			r.rs.add(tableNAT, chain, c, p.match, "!", "-s", cidrs[0].String(), "-d", ip.String(), dport, "-j", chainMarkMasq)
		case len(cidrs) > 1:
			r.rs.add(tableNAT, chain, c, p.match, "-d", ip.String(), dport, "-j", chainOffClusterMasq)
		}
	}
}

// balance writes the affinity checks and the random choice over eps:
// jumps to their KUBE-SEP chains, or DNATs right here when the port has
// none (the DNAT needs -p for its port). Every endpoint balanced over is
// a member of the hairpin set.
func (r *renderer) balance(p *portPlan, chain string, eps []endpoint) {
	r.rs.chain(tableNAT, chain)
	seps := usesSEPs(p)
	if p.sp.Affinity > 0 {
		for _, ep := range eps {
			r.rs.add(tableNAT, chain, comment(p.sp.Label+" -> "+ep.addr.String()),
				"-m recent --name", ep.chain, fmt.Sprintf("--rcheck --seconds %d --reap", p.sp.Affinity), "-j", ep.chain)
		}
	}
	for i, ep := range eps {
		args := make([]string, 0, 5)
		args = append(args, comment(p.sp.Label+" -> "+ep.addr.String()))
		if !seps {
			args = append(args, "-p", p.sp.Protocol.String())
		}
		if left := len(eps) - i; left > 1 {
			args = append(args, fmt.Sprintf("-m statistic --mode random --probability %0.10f", 1.0/float64(left)))
		}
		if seps {
			args = append(args, "-j", ep.chain)
		} else {
			args = append(args, "-j DNAT --to-destination", ep.addr.String())
		}
		r.rs.add(tableNAT, chain, args...)
		r.rs.addHairpin(hairpinMember(p.sp.Protocol, ep.addr))
	}
}

// hairpinMember is an endpoint's hairpin set member, as ipset save
// spells it: "ip,proto:port,ip".
func hairpinMember(proto dataplane.Protocol, ep netip.AddrPort) string {
	ip := ep.Addr().String()
	return fmt.Sprintf("%s,%s:%d,%s", ip, proto, ep.Port(), ip)
}

// extChain writes KUBE-EXT: masquerade and choose the policy chain.
// Under a Local policy without local endpoints only the short-circuits
// to KUBE-SVC remain.
func (r *renderer) extChain(p *portPlan, ext, svc, svl string) {
	if !p.sp.External.Local {
		r.rs.add(tableNAT, ext, comment("masquerade traffic for "+p.sp.Label+" external destinations"), "-j", chainMarkMasq)
		r.rs.add(tableNAT, ext, "-j", svc)
		return
	}
	short := p.sp.ShortCircuit
	if short {
		for _, c := range r.node.ClusterCIDRs {
			r.rs.add(tableNAT, ext, comment("pod traffic for "+p.sp.Label+" external destinations"), "-s", c.String(), "-j", svc)
		}
	}
	r.rs.add(tableNAT, ext, comment("masquerade LOCAL traffic for "+p.sp.Label+" external destinations"),
		"-m addrtype --src-type LOCAL -j", chainMarkMasq)
	if short {
		r.rs.add(tableNAT, ext, comment("route LOCAL traffic for "+p.sp.Label+" external destinations"),
			"-m addrtype --src-type LOCAL -j", svc)
	}
	if p.sp.External.Serves() {
		r.rs.add(tableNAT, ext, "-j", svl)
	}
}

// seps writes one KUBE-SEP chain per endpoint when the port has them:
// DNAT, recording the client for affinity (the hairpin set marks
// hairpin traffic, as for every other endpoint).
func (r *renderer) seps(p *portPlan, eps []endpoint) {
	if !usesSEPs(p) {
		return
	}
	for _, ep := range eps {
		if _, done := r.rs.Chains[tableNAT][ep.chain]; done {
			continue
		}
		r.rs.add(tableNAT, ep.chain, comment(p.sp.Label), p.match, "-m recent --name", ep.chain,
			"--set -j DNAT --to-destination", ep.addr.String())
	}
}

func join(parts ...string) string {
	n := 0
	for _, s := range parts {
		n += len(s) + 1
	}
	b := make([]byte, 0, n)
	for i, s := range parts {
		if i > 0 {
			b = append(b, ' ')
		}
		b = append(b, s...)
	}
	return string(b)
}
