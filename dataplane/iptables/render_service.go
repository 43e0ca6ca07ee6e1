package iptables

import (
	"fmt"
	"net/netip"

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
	id             string // hashed into chain names
	match          string // "-p tcp -m tcp"
	cluster, local []endpoint
}

// service renders every port of one view.
func (r *renderer) service(key string, sv *switchyardv1.ServiceView) {
	svc, ok := serviceport.Read(key, sv, serviceport.Family(r.fam), func(service, reason string) {
		r.rs.Skips = append(r.rs.Skips, Skip{Service: service, Reason: reason})
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
		p := portPlan{sp: sp, id: portID(svc.Namespace, svc.ServiceName, sp.Name, sp.Protocol),
			match: "-p " + sp.Protocol + " -m " + sp.Protocol}
		seps := r.usesSEPs(&p)
		p.cluster = endpointsOf(p.id, sp.Cluster, seps)
		p.local = endpointsOf(p.id, sp.Local, seps)
		r.port(&p)
	}
}

// usesSEPs reports whether a port's endpoints get KUBE-SEP chains: in
// kube-proxy's shape always, else only with ClientIP affinity, whose
// -m recent lists need a name per endpoint.
func (r *renderer) usesSEPs(p *portPlan) bool { return r.opts.KubeProxyShape || p.sp.Affinity > 0 }

// endpointsOf lists the endpoints of one service port, naming their
// KUBE-SEP chains when they have one (a hash per endpoint, so skipped
// when not needed).
func endpointsOf(id string, eps []serviceport.Endpoint, seps bool) []endpoint {
	out := make([]endpoint, 0, len(eps))
	for _, ep := range eps {
		e := endpoint{addr: ep.Addr}
		if seps {
			e.chain = sepChain(id, ep.Addr)
		}
		out = append(out, e)
	}
	return out
}

func comment(s string) string { return `-m comment --comment "` + s + `"` }

// port renders one service port: its entry rules (shards, node ports,
// filter rejects) and its chains.
func (r *renderer) port(p *portPlan) {
	svc, svl, ext, fw := svcChain(p.id), svlChain(p.id), extChain(p.id), fwChain(p.id)
	extReachable := p.sp.NodePort > 0 || len(p.sp.ExternalIPs) > 0 || len(p.sp.LBIPs) > 0
	intEPs, extEPs := p.cluster, p.cluster
	intChain := svc
	if p.sp.IntLocal {
		intEPs, intChain = p.local, svl
	}
	if p.sp.ExtLocal {
		extEPs = p.local
	}
	hasInternal := len(intEPs) > 0
	hasExternal := extReachable && len(extEPs) > 0
	// usesExt: external addresses enter KUBE-EXT whenever the port has
	// endpoints anywhere, as in kube-proxy. Under a Local policy on a node
	// without local endpoints, pod and node-originated traffic is still
	// short-circuited to the cluster endpoints there; what falls through
	// is not DNATed and meets the filter DROP (which never sees traffic
	// KUBE-EXT DNATed, its destination no longer being the service's).
	usesExt := hasExternal || (extReachable && p.sp.ExtLocal && len(p.cluster) > 0)
	usesSVL := len(p.local) > 0 && (p.sp.IntLocal || (extReachable && p.sp.ExtLocal))
	block := "REJECT"
	switch {
	case p.sp.HasAny:
		block = "DROP"
	case p.sp.Protocol == "tcp":
		// An ICMP error to a connect() on this node arrives while the
		// socket is locked and only takes effect at the SYN retransmit
		// (1–2 s, measured); a RST refuses at once on every path.
		block = "REJECT --reject-with tcp-reset"
	}
	dport := fmt.Sprintf("--dport %d", p.sp.Port)

	for _, ip := range p.sp.ClusterIPs {
		if hasInternal {
			r.toShard(ip, join(comment(p.sp.Label+" cluster IP"), p.match, "-d", ip.String(), dport, "-j", intChain))
		} else {
			r.rs.add(tableFilter, chainServices, comment(p.sp.Label+" has no endpoints for internal traffic"),
				p.match, "-d", ip.String(), dport, "-j", block)
		}
	}
	r.external(p, "external IP", p.sp.ExternalIPs, ext, usesExt, hasExternal, block)
	lbTarget := ext
	if p.sp.HasRanges {
		lbTarget = fw
		for _, ip := range p.sp.LBIPs {
			r.rs.add(tableFilter, chainFirewall, comment(p.sp.Label+" traffic not accepted by "+fw),
				p.match, "-d", ip.String(), dport, "-j DROP")
		}
	}
	r.external(p, "loadbalancer IP", p.sp.LBIPs, lbTarget, usesExt, hasExternal, block)
	if p.sp.NodePort > 0 {
		np := fmt.Sprintf("--dport %d", p.sp.NodePort)
		if usesExt {
			r.rs.add(tableNAT, chainNodePorts, comment(p.sp.Label), p.match, np, "-j", ext)
		}
		if !hasExternal {
			r.rs.add(tableFilter, chainExternalServices, comment(p.sp.Label+" has no endpoints for external traffic"),
				"-m addrtype --dst-type LOCAL", p.match, np, "-j", block)
		}
	}

	if len(p.cluster) > 0 {
		r.clusterChain(p, svc)
	}
	if usesSVL {
		r.balance(p, svl, p.local)
	}
	if usesExt {
		r.extChain(p, ext, svc, svl, hasExternal)
		if p.sp.HasRanges && len(p.sp.LBIPs) > 0 {
			r.rs.chain(tableNAT, fw)
			for _, src := range p.sp.SourceRanges {
				r.rs.add(tableNAT, fw, comment(p.sp.Label+" loadbalancer IP"), "-s", src.String(), "-j", ext)
			}
		}
	}
	r.seps(p, p.cluster)
	if usesSVL {
		r.seps(p, p.local)
	}
	if u, ok := p.sp.UDPFlows(); ok {
		r.rs.udp[p.id] = u
	}
}

// external writes the entry rules of external or load-balancer addresses:
// into the shards when KUBE-EXT is used, and a filter REJECT/DROP when no
// endpoint serves external traffic (both under a Local policy without
// local endpoints: see usesExt).
func (r *renderer) external(p *portPlan, kind string, ips []netip.Addr, target string, usesExt, hasExternal bool, block string) {
	dport := fmt.Sprintf("--dport %d", p.sp.Port)
	for _, ip := range ips {
		if usesExt {
			r.toShard(ip, join(comment(p.sp.Label+" "+kind), p.match, "-d", ip.String(), dport, "-j", target))
		}
		if !hasExternal {
			r.rs.add(tableFilter, chainExternalServices, comment(p.sp.Label+" has no endpoints for external traffic"),
				p.match, "-d", ip.String(), dport, "-j", block)
		}
	}
}

// clusterChain writes KUBE-SVC: masquerade off-cluster sources of the
// cluster IPs, then balance over the cluster endpoints.
func (r *renderer) clusterChain(p *portPlan, svc string) {
	r.rs.chain(tableNAT, svc)
	if !p.sp.IntLocal {
		dport := fmt.Sprintf("--dport %d", p.sp.Port)
		for _, ip := range p.sp.ClusterIPs {
			c := comment(p.sp.Label + " cluster IP")
			switch cidrs := r.node.clusterCIDRs; {
			case r.node.masqueradeAll:
				r.rs.add(tableNAT, svc, c, p.match, "-d", ip.String(), dport, "-j", chainMarkMasq)
			case len(cidrs) == 1:
				r.rs.add(tableNAT, svc, c, p.match, "!", "-s", cidrs[0].String(), "-d", ip.String(), dport, "-j", chainMarkMasq)
			case len(cidrs) > 1:
				r.rs.add(tableNAT, svc, c, p.match, "-d", ip.String(), dport, "-j", chainOffClusterMasq)
			}
		}
	}
	r.balance(p, svc, p.cluster)
}

// balance writes the affinity checks and the random choice over eps:
// jumps to their KUBE-SEP chains, or DNATs right here when the port has
// none (the DNAT needs -p for its port). Every endpoint balanced over is
// a member of the hairpin set unless kube-proxy's shape marks hairpin
// traffic in KUBE-SEP.
func (r *renderer) balance(p *portPlan, chain string, eps []endpoint) {
	r.rs.chain(tableNAT, chain)
	seps := r.usesSEPs(p)
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
			args = append(args, "-p", p.sp.Protocol)
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
		if !r.opts.KubeProxyShape {
			r.rs.addHairpin(hairpinMember(p.sp.Protocol, ep.addr))
		}
	}
}

// hairpinMember is an endpoint's hairpin set member, as ipset save
// spells it: "ip,proto:port,ip".
func hairpinMember(proto string, ep netip.AddrPort) string {
	ip := ep.Addr().String()
	return fmt.Sprintf("%s,%s:%d,%s", ip, proto, ep.Port(), ip)
}

// extChain writes KUBE-EXT: masquerade and choose the policy chain.
// Without local endpoints (hasLocal false) under a Local policy only the
// short-circuits to KUBE-SVC remain.
func (r *renderer) extChain(p *portPlan, ext, svc, svl string, hasLocal bool) {
	if !p.sp.ExtLocal {
		r.rs.add(tableNAT, ext, comment("masquerade traffic for "+p.sp.Label+" external destinations"), "-j", chainMarkMasq)
		r.rs.add(tableNAT, ext, "-j", svc)
		return
	}
	hasSVC := len(p.cluster) > 0
	if hasSVC {
		for _, c := range r.node.clusterCIDRs {
			r.rs.add(tableNAT, ext, comment("pod traffic for "+p.sp.Label+" external destinations"), "-s", c.String(), "-j", svc)
		}
	}
	r.rs.add(tableNAT, ext, comment("masquerade LOCAL traffic for "+p.sp.Label+" external destinations"),
		"-m addrtype --src-type LOCAL -j", chainMarkMasq)
	if hasSVC {
		r.rs.add(tableNAT, ext, comment("route LOCAL traffic for "+p.sp.Label+" external destinations"),
			"-m addrtype --src-type LOCAL -j", svc)
	}
	if hasLocal {
		r.rs.add(tableNAT, ext, "-j", svl)
	}
}

// seps writes one KUBE-SEP chain per endpoint when the port has them:
// DNAT (recording the client for affinity), preceded in kube-proxy's
// shape by its per-endpoint hairpin masquerade.
func (r *renderer) seps(p *portPlan, eps []endpoint) {
	if !r.usesSEPs(p) {
		return
	}
	for _, ep := range eps {
		if _, done := r.rs.Chains[tableNAT][ep.chain]; done {
			continue
		}
		c := comment(p.sp.Label)
		if r.opts.KubeProxyShape {
			r.rs.add(tableNAT, ep.chain, c, "-s", ep.addr.Addr().String(), "-j", chainMarkMasq)
		}
		recent := ""
		if p.sp.Affinity > 0 {
			recent = " -m recent --name " + ep.chain + " --set"
		}
		r.rs.add(tableNAT, ep.chain, c, p.match+recent, "-j DNAT --to-destination", ep.addr.String())
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
