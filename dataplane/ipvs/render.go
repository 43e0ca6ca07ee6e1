package ipvs

import (
	"fmt"
	"net/netip"
	"regexp"
	"slices"
	"sort"
	"strconv"

	"github.com/switchyard-proxy/switchyard/dataplane"
	"github.com/switchyard-proxy/switchyard/dataplane/conntrack"
	switchyardv1 "github.com/switchyard-proxy/switchyard/proto/switchyard/v1"
)

// schedulers are the IPVS schedulers of mainline Linux.
var schedulers = []string{"rr", "wrr", "lc", "wlc", "lblc", "lblcr", "dh", "sh", "sed", "nq", "fo", "ovf", "mh", "twos"}

// ValidScheduler reports whether name is an IPVS scheduler.
func ValidScheduler(name string) bool { return slices.Contains(schedulers, name) }

var (
	dnsName  = regexp.MustCompile(`^[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?$`)
	portName = regexp.MustCompile(`^([a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?)?$`)
)

var protocols = map[switchyardv1.Protocol]Protocol{
	switchyardv1.Protocol_PROTOCOL_TCP:  TCP,
	switchyardv1.Protocol_PROTOCOL_UDP:  UDP,
	switchyardv1.Protocol_PROTOCOL_SCTP: SCTP,
}

type renderOptions struct {
	families  []Family
	scheduler string
}

// renderer holds one render call for one family.
type renderer struct {
	w         *desired
	fam       Family
	sched     string
	nodeIPs   []netip.Addr
	cidrs     []netip.Prefix
	masqAll   bool
	owner     map[VSKey]string // service that claimed a virtual server
	skipsSeen map[Skip]bool
}

// render turns a node's state into the model this mode wants. It does no
// I/O and is deterministic. Bad input is skipped and listed in skips.
func render(st *dataplane.State, o renderOptions) *desired {
	w := &desired{model: newModel(), nodeIPs: map[netip.Addr]bool{}, udp: map[Family]map[string]conntrack.UDPPort{}}
	seen := map[Skip]bool{}
	sched := o.scheduler
	if s := st.Config.GetIpvsScheduler(); s != "" {
		if ValidScheduler(s) {
			sched = s
		} else {
			w.skips = append(w.skips, Skip{Reason: fmt.Sprintf("node config: unknown IPVS scheduler %q, using %s", s, sched)})
		}
	}
	names := sortedKeys(st.Services)
	owner := map[VSKey]string{}
	for _, fam := range o.families {
		r := &renderer{w: w, fam: fam, sched: sched, owner: owner, skipsSeen: seen, masqAll: st.Config.GetMasqueradeAll()}
		r.readNode(st.Config)
		w.udp[fam] = map[string]conntrack.UDPPort{}
		r.fixed()
		for _, n := range names {
			r.service(n, st.Services[n])
		}
	}
	return w
}

func (r *renderer) skip(svc, format string, args ...any) {
	s := Skip{Service: svc, Reason: fmt.Sprintf(format, args...)}
	if !r.skipsSeen[s] {
		r.skipsSeen[s] = true
		r.w.skips = append(r.w.skips, s)
	}
}

// parseAddr parses s; ok is false when it is of another family.
func (r *renderer) parseAddr(s string) (netip.Addr, bool, error) {
	a, err := netip.ParseAddr(s)
	if err != nil {
		return a, false, fmt.Errorf("bad address %q", s)
	}
	a = a.Unmap()
	return a, a.Is4() == (r.fam == IPv4), nil
}

func (r *renderer) readNode(cfg *switchyardv1.NodeConfig) {
	for _, s := range cfg.GetClusterCidrs() {
		p, err := netip.ParsePrefix(s)
		if err != nil {
			r.skip("", "node config: bad cluster CIDR %q", s)
		} else if p.Addr().Is4() == (r.fam == IPv4) {
			r.cidrs = append(r.cidrs, p.Masked())
		}
	}
	for _, s := range cfg.GetNodeIps() {
		a, ok, err := r.parseAddr(s)
		if err != nil {
			r.skip("", "node config: %v", err)
		} else if ok && !slices.Contains(r.nodeIPs, a) {
			r.nodeIPs = append(r.nodeIPs, a)
			r.w.nodeIPs[a] = true
		}
	}
}

// portPlan is one service port in one family.
type portPlan struct {
	svc, id      string
	proto        Protocol
	port, node   uint16
	cluster      []RealServer
	local        []RealServer
	intLocal     bool
	extLocal     bool
	affinity     uint32
	hasAny       bool
	hasRanges    bool
	clusterIPs   []netip.Addr
	externalIPs  []netip.Addr
	lbIPs        []netip.Addr
	sourceRanges []netip.Prefix
}

// service renders every port of one view.
func (r *renderer) service(key string, sv *switchyardv1.ServiceView) {
	if sv == nil || !dnsName.MatchString(sv.GetNamespace()) || !dnsName.MatchString(sv.GetName()) {
		r.skip(key, "bad or missing namespace/name")
		return
	}
	name := sv.GetNamespace() + "/" + sv.GetName()
	if key != name {
		r.skip(key, "resource name does not match %s", name)
		return
	}
	base := portPlan{
		svc:       name,
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
		p, err := netip.ParsePrefix(s)
		if err != nil {
			r.skip(name, "source range: bad CIDR %q", s)
		} else if p.Addr().Is4() == (r.fam == IPv4) {
			base.sourceRanges = append(base.sourceRanges, p.Masked())
		}
	}
	if hc := sv.GetHealthCheckNodePort(); hc > 0 && hc < 65536 && base.extLocal {
		r.member(setHealthCheck, strconv.Itoa(int(hc)))
	}
	seen := map[string]bool{}
	for _, sp := range sv.GetPorts() {
		proto, ok := protocols[sp.GetProtocol()]
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
		p.id = name + ":" + sp.GetName() + "/" + proto.lower()
		p.proto, p.port, p.node = proto, uint16(sp.GetPort()), uint16(sp.GetNodePort())
		p.cluster = r.endpoints(name, sp.GetName(), sv.GetClusterEndpoints())
		p.local = r.endpoints(name, sp.GetName(), sv.GetLocalEndpoints())
		r.port(&p)
	}
}

// addrs parses the addresses of this family, skipping bad ones.
func (r *renderer) addrs(svc string, in []string) []netip.Addr {
	var out []netip.Addr
	for _, s := range in {
		a, ok, err := r.parseAddr(s)
		if err != nil {
			r.skip(svc, "%v", err)
		} else if ok && !slices.Contains(out, a) {
			out = append(out, a)
		}
	}
	return out
}

// endpoints returns the real servers of this family serving port name,
// deduplicated and sorted. Terminating endpoints get weight 0 when the
// set also has endpoints that are not terminating (they drain); a set of
// only terminating ones is the control plane's serving fallback and gets
// weight 1.
func (r *renderer) endpoints(svc, name string, in []*switchyardv1.Endpoint) []RealServer {
	var out []RealServer
	term := map[netip.AddrPort]bool{}
	active := false
	for _, ep := range in {
		a, ok, err := r.parseAddr(ep.GetAddress())
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
			if slices.ContainsFunc(out, func(rs RealServer) bool { return rs.Addr == ap }) {
				continue
			}
			out = append(out, RealServer{Addr: ap, Weight: 1})
			term[ap] = ep.GetTerminating()
			active = active || !ep.GetTerminating()
		}
	}
	for i := range out {
		if active && term[out[i].Addr] {
			out[i].Weight = 0
		}
	}
	slices.SortFunc(out, func(x, y RealServer) int { return x.Addr.Compare(y.Addr) })
	return out
}

// ipPort is the hash:ip,port member for a, p.
func ipPort(a netip.Addr, p Protocol, port uint16) string {
	return fmt.Sprintf("%s,%s:%d", a, p.lower(), port)
}

// port renders one service port: virtual servers, addresses, members.
func (r *renderer) port(p *portPlan) {
	intEPs, extEPs := p.cluster, p.cluster
	if p.intLocal {
		intEPs = p.local
	}
	if p.extLocal {
		extEPs = p.local
	}
	block := setReject
	if p.hasAny {
		block = setDrop
	}
	// dst adds the virtual server for one address, or blocks the address.
	dst := func(a netip.Addr, port uint16, eps []RealServer, bind bool) {
		key := VSKey{Addr: a, Port: port, Protocol: p.proto}
		if o, taken := r.owner[key]; taken && o != p.svc {
			r.skip(p.svc, "%s is already a port of %s", key, o)
			return
		}
		r.owner[key] = p.svc
		vm := &vsModel{vs: VirtualServer{Key: key, Scheduler: r.sched, Timeout: p.affinity}, rs: map[netip.AddrPort]RealServer{}}
		for _, rs := range eps {
			vm.rs[rs.Addr] = rs
		}
		r.w.vs[key] = vm
		if bind {
			r.w.addrs[a] = true
			r.member(setServiceIPs, a.String())
		}
		if len(eps) == 0 {
			r.member(block, ipPort(a, p.proto, port))
		}
	}
	for _, a := range p.clusterIPs {
		dst(a, p.port, intEPs, true)
		r.member(setClusterIP, ipPort(a, p.proto, p.port))
	}
	ext, lb := setExternalIP, setLB
	if p.extLocal {
		ext, lb = setExternalLocal, setLBLocal
	}
	for _, a := range p.externalIPs {
		dst(a, p.port, extEPs, true)
		r.member(ext, ipPort(a, p.proto, p.port))
	}
	for _, a := range p.lbIPs {
		dst(a, p.port, extEPs, true)
		r.member(lb, ipPort(a, p.proto, p.port))
		if p.hasRanges {
			r.member(setLBFW, ipPort(a, p.proto, p.port))
			for _, src := range p.sourceRanges {
				r.member(setLBSource, ipPort(a, p.proto, p.port)+","+netMember(src))
			}
		}
	}
	if p.node > 0 {
		if len(r.nodeIPs) == 0 && len(p.clusterIPs) > 0 {
			r.skip(p.svc, "node port %d: NodeConfig has no %s node IP", p.node, r.fam)
		}
		set := nodePortSet(p.proto, p.extLocal)
		r.member(set, strconv.Itoa(int(p.node)))
		for _, a := range r.nodeIPs {
			dst(a, p.node, extEPs, false)
		}
	}
	var eps []RealServer
	eps = append(append(eps, intEPs...), extEPs...)
	for _, rs := range eps {
		a := rs.Addr.Addr()
		r.member(setLoopBack, ipPort(a, p.proto, rs.Addr.Port())+","+a.String())
	}
	r.recordUDP(p, eps)
}

// netMember spells a CIDR as ipset save does: a host prefix is a bare
// address.
func netMember(p netip.Prefix) string {
	if p.IsSingleIP() {
		return p.Addr().String()
	}
	return p.String()
}

// recordUDP notes a UDP port for conntrack cleanup.
func (r *renderer) recordUDP(p *portPlan, eps []RealServer) {
	if p.proto != UDP {
		return
	}
	u := conntrack.UDPPort{NodePort: p.node}
	for _, list := range [][]netip.Addr{p.clusterIPs, p.externalIPs, p.lbIPs} {
		for _, a := range list {
			u.Dsts = append(u.Dsts, netip.AddrPortFrom(a, p.port))
		}
	}
	for _, rs := range eps {
		u.AddEndpoint(rs.Addr.Addr())
	}
	sort.Slice(u.Endpoints, func(i, j int) bool { return u.Endpoints[i].Less(u.Endpoints[j]) })
	r.w.udp[r.fam][p.id] = u
}
