package iptables

import (
	"fmt"
	"net/netip"
	"regexp"
	"slices"

	switchyardv1 "github.com/switchyard-proxy/switchyard/proto/switchyard/v1"
)

// endpoint is one backend of one service port in one family.
type endpoint struct {
	addr  netip.AddrPort
	chain string // KUBE-SEP-…
}

// portPlan is one service port reduced to what its rules need.
type portPlan struct {
	label        string // "namespace/name:port", as in kube-proxy's comments
	id           string // hashed into chain names
	proto        string // "tcp", "udp", "sctp"
	match        string // "-p tcp -m tcp"
	port         uint32
	nodePort     uint32
	clusterIPs   []netip.Addr
	externalIPs  []netip.Addr
	lbIPs        []netip.Addr
	sourceRanges []netip.Prefix
	hasRanges    bool // ranges exist in any family: the rest is dropped
	cluster      []endpoint
	local        []endpoint
	intLocal     bool
	extLocal     bool
	affinity     uint32 // ClientIP timeout in seconds, 0 without affinity
	hasAny       bool
}

var (
	dnsName  = regexp.MustCompile(`^[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?$`)
	portName = regexp.MustCompile(`^([a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?)?$`)
)

var protoMatch = map[switchyardv1.Protocol]string{
	switchyardv1.Protocol_PROTOCOL_TCP:  "tcp",
	switchyardv1.Protocol_PROTOCOL_UDP:  "udp",
	switchyardv1.Protocol_PROTOCOL_SCTP: "sctp",
}

// service renders every port of one view.
func (r *renderer) service(key string, sv *switchyardv1.ServiceView) {
	if sv == nil || !dnsName.MatchString(sv.GetNamespace()) || !dnsName.MatchString(sv.GetName()) {
		r.skip(key, "bad or missing namespace/name")
		return
	}
	name := sv.GetNamespace() + "/" + sv.GetName()
	if key != name {
		// Two keys for one service would write the same chains twice.
		r.skip(key, "resource name does not match %s", name)
		return
	}
	base := portPlan{
		intLocal:  sv.GetInternalTrafficPolicy() == switchyardv1.TrafficPolicy_TRAFFIC_POLICY_LOCAL,
		extLocal:  sv.GetExternalTrafficPolicy() == switchyardv1.TrafficPolicy_TRAFFIC_POLICY_LOCAL,
		hasAny:    sv.GetHasAnyEndpoints(),
		hasRanges: len(sv.GetLoadBalancerSourceRanges()) > 0,
	}
	if sv.GetSessionAffinity() == switchyardv1.SessionAffinity_SESSION_AFFINITY_CLIENT_IP {
		base.affinity = max(sv.GetSessionAffinityTimeoutSeconds(), 1)
	}
	base.clusterIPs = r.addrs(name, sv.GetClusterIps())
	base.externalIPs = r.addrs(name, sv.GetExternalIps())
	base.lbIPs = r.addrs(name, sv.GetLoadBalancerIps())
	for _, s := range sv.GetLoadBalancerSourceRanges() {
		p, ok, err := r.fam.parsePrefix(s)
		if err != nil {
			r.skip(name, "source range: %v", err)
		} else if ok {
			base.sourceRanges = append(base.sourceRanges, p)
		}
	}
	if hc := sv.GetHealthCheckNodePort(); hc > 0 && hc < 65536 && base.extLocal {
		r.rs.add(tableFilter, chainNodePorts, comment(name+" health check node port"),
			fmt.Sprintf("-p tcp -m tcp --dport %d -j ACCEPT", hc))
	}
	seen := map[string]bool{}
	for _, sp := range sv.GetPorts() {
		proto, ok := protoMatch[sp.GetProtocol()]
		switch {
		case !ok:
			r.skip(name, "port %q: unknown protocol %v", sp.GetName(), sp.GetProtocol())
			continue
		case !portName.MatchString(sp.GetName()) || seen[sp.GetName()]:
			r.skip(name, "port %q: bad or duplicate name", sp.GetName())
			continue
		case sp.GetPort() == 0 || sp.GetPort() > 65535 || sp.GetNodePort() > 65535:
			r.skip(name, "port %q: bad port number", sp.GetName())
			continue
		}
		seen[sp.GetName()] = true
		p := base
		p.label = name
		if sp.GetName() != "" {
			p.label += ":" + sp.GetName()
		}
		p.id = portID(sv.GetNamespace(), sv.GetName(), sp.GetName(), proto)
		p.proto, p.match = proto, "-p "+proto+" -m "+proto
		p.port, p.nodePort = sp.GetPort(), sp.GetNodePort()
		p.cluster = r.endpoints(name, p.id, sp.GetName(), sv.GetClusterEndpoints())
		p.local = r.endpoints(name, p.id, sp.GetName(), sv.GetLocalEndpoints())
		r.port(&p)
	}
}

// addrs parses the addresses of this family, skipping bad ones.
func (r *renderer) addrs(svc string, in []string) []netip.Addr {
	var out []netip.Addr
	for _, s := range in {
		a, ok, err := r.fam.parseAddr(s)
		if err != nil {
			r.skip(svc, "%v", err)
		} else if ok && !slices.Contains(out, a) {
			out = append(out, a)
		}
	}
	return out
}

// endpoints returns the endpoints of this family that serve port name,
// deduplicated and sorted.
func (r *renderer) endpoints(svc, id, name string, in []*switchyardv1.Endpoint) []endpoint {
	var out []endpoint
	seen := map[netip.AddrPort]bool{}
	for _, ep := range in {
		a, ok, err := r.fam.parseAddr(ep.GetAddress())
		if err != nil {
			r.skip(svc, "endpoint: %v", err)
			continue
		}
		if !ok {
			continue
		}
		for _, pt := range ep.GetPorts() {
			if pt.GetName() != name || pt.GetPort() == 0 || pt.GetPort() > 65535 {
				continue
			}
			ap := netip.AddrPortFrom(a, uint16(pt.GetPort()))
			if !seen[ap] {
				seen[ap] = true
				out = append(out, endpoint{addr: ap, chain: sepChain(id, ap)})
			}
		}
	}
	slices.SortFunc(out, func(x, y endpoint) int { return x.addr.Compare(y.addr) })
	return out
}

func comment(s string) string { return `-m comment --comment "` + s + `"` }

// port renders one service port: its entry rules (shards, node ports,
// filter rejects) and its chains.
func (r *renderer) port(p *portPlan) {
	svc, svl, ext, fw := svcChain(p.id), svlChain(p.id), extChain(p.id), fwChain(p.id)
	extReachable := p.nodePort > 0 || len(p.externalIPs) > 0 || len(p.lbIPs) > 0
	intEPs, extEPs := p.cluster, p.cluster
	intChain := svc
	if p.intLocal {
		intEPs, intChain = p.local, svl
	}
	if p.extLocal {
		extEPs = p.local
	}
	hasInternal := len(intEPs) > 0
	hasExternal := extReachable && len(extEPs) > 0
	usesSVL := len(p.local) > 0 && (p.intLocal || (extReachable && p.extLocal))
	block := "REJECT"
	switch {
	case p.hasAny:
		block = "DROP"
	case p.proto == "tcp":
		// An ICMP error to a connect() on this node arrives while the
		// socket is locked and only takes effect at the SYN retransmit
		// (1–2 s, measured); a RST refuses at once on every path.
		block = "REJECT --reject-with tcp-reset"
	}
	dport := fmt.Sprintf("--dport %d", p.port)

	for _, ip := range p.clusterIPs {
		if hasInternal {
			r.toShard(ip, join(comment(p.label+" cluster IP"), p.match, "-d", ip.String(), dport, "-j", intChain))
		} else {
			r.rs.add(tableFilter, chainServices, comment(p.label+" has no endpoints for internal traffic"),
				p.match, "-d", ip.String(), dport, "-j", block)
		}
	}
	r.external(p, "external IP", p.externalIPs, ext, hasExternal, block)
	lbTarget := ext
	if p.hasRanges {
		lbTarget = fw
		for _, ip := range p.lbIPs {
			r.rs.add(tableFilter, chainFirewall, comment(p.label+" traffic not accepted by "+fw),
				p.match, "-d", ip.String(), dport, "-j DROP")
		}
	}
	r.external(p, "loadbalancer IP", p.lbIPs, lbTarget, hasExternal, block)
	if p.nodePort > 0 {
		np := fmt.Sprintf("--dport %d", p.nodePort)
		if hasExternal {
			r.rs.add(tableNAT, chainNodePorts, comment(p.label), p.match, np, "-j", ext)
		} else {
			r.rs.add(tableFilter, chainExternalServices, comment(p.label+" has no endpoints for external traffic"),
				"-m addrtype --dst-type LOCAL", p.match, np, "-j", block)
		}
	}

	if len(p.cluster) > 0 {
		r.clusterChain(p, svc)
	}
	if usesSVL {
		r.balance(p, svl, p.local)
	}
	if hasExternal {
		r.extChain(p, ext, svc, svl)
		if p.hasRanges && len(p.lbIPs) > 0 {
			r.rs.chain(tableNAT, fw)
			for _, src := range p.sourceRanges {
				r.rs.add(tableNAT, fw, comment(p.label+" loadbalancer IP"), "-s", src.String(), "-j", ext)
			}
		}
	}
	r.seps(p, p.cluster)
	if usesSVL {
		r.seps(p, p.local)
	}
	r.recordUDP(p)
}

// external writes the entry rules of external or load-balancer addresses:
// into the shards when there are endpoints, else a filter REJECT/DROP.
func (r *renderer) external(p *portPlan, kind string, ips []netip.Addr, target string, ok bool, block string) {
	dport := fmt.Sprintf("--dport %d", p.port)
	for _, ip := range ips {
		if ok {
			r.toShard(ip, join(comment(p.label+" "+kind), p.match, "-d", ip.String(), dport, "-j", target))
		} else {
			r.rs.add(tableFilter, chainExternalServices, comment(p.label+" has no endpoints for external traffic"),
				p.match, "-d", ip.String(), dport, "-j", block)
		}
	}
}

// clusterChain writes KUBE-SVC: masquerade off-cluster sources of the
// cluster IPs, then balance over the cluster endpoints.
func (r *renderer) clusterChain(p *portPlan, svc string) {
	r.rs.chain(tableNAT, svc)
	if !p.intLocal {
		dport := fmt.Sprintf("--dport %d", p.port)
		for _, ip := range p.clusterIPs {
			c := comment(p.label + " cluster IP")
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

// balance writes the affinity checks and the random choice over eps.
func (r *renderer) balance(p *portPlan, chain string, eps []endpoint) {
	r.rs.chain(tableNAT, chain)
	if p.affinity > 0 {
		for _, ep := range eps {
			r.rs.add(tableNAT, chain, comment(p.label+" -> "+ep.addr.String()),
				"-m recent --name", ep.chain, fmt.Sprintf("--rcheck --seconds %d --reap", p.affinity), "-j", ep.chain)
		}
	}
	for i, ep := range eps {
		left := len(eps) - i
		c := comment(p.label + " -> " + ep.addr.String())
		if left > 1 {
			r.rs.add(tableNAT, chain, c, fmt.Sprintf("-m statistic --mode random --probability %0.10f", 1.0/float64(left)), "-j", ep.chain)
		} else {
			r.rs.add(tableNAT, chain, c, "-j", ep.chain)
		}
	}
}

// extChain writes KUBE-EXT: masquerade and choose the policy chain.
func (r *renderer) extChain(p *portPlan, ext, svc, svl string) {
	if !p.extLocal {
		r.rs.add(tableNAT, ext, comment("masquerade traffic for "+p.label+" external destinations"), "-j", chainMarkMasq)
		r.rs.add(tableNAT, ext, "-j", svc)
		return
	}
	hasSVC := len(p.cluster) > 0
	if hasSVC {
		for _, c := range r.node.clusterCIDRs {
			r.rs.add(tableNAT, ext, comment("pod traffic for "+p.label+" external destinations"), "-s", c.String(), "-j", svc)
		}
	}
	r.rs.add(tableNAT, ext, comment("masquerade LOCAL traffic for "+p.label+" external destinations"),
		"-m addrtype --src-type LOCAL -j", chainMarkMasq)
	if hasSVC {
		r.rs.add(tableNAT, ext, comment("route LOCAL traffic for "+p.label+" external destinations"),
			"-m addrtype --src-type LOCAL -j", svc)
	}
	r.rs.add(tableNAT, ext, "-j", svl)
}

// seps writes one KUBE-SEP chain per endpoint: hairpin masquerade, DNAT.
func (r *renderer) seps(p *portPlan, eps []endpoint) {
	for _, ep := range eps {
		if _, done := r.rs.Chains[tableNAT][ep.chain]; done {
			continue
		}
		c := comment(p.label)
		r.rs.add(tableNAT, ep.chain, c, "-s", ep.addr.Addr().String(), "-j", chainMarkMasq)
		recent := ""
		if p.affinity > 0 {
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
