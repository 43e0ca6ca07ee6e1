package ipvs

import (
	"fmt"
	"net/netip"
	"slices"
	"sort"
	"strconv"

	"github.com/switchyard-proxy/switchyard/dataplane"
	"github.com/switchyard-proxy/switchyard/dataplane/conntrack"
	"github.com/switchyard-proxy/switchyard/dataplane/internal/sorted"
	"github.com/switchyard-proxy/switchyard/dataplane/serviceport"
	switchyardv1 "github.com/switchyard-proxy/switchyard/proto/switchyard/v1"
)

// schedulers are the IPVS schedulers of mainline Linux.
var schedulers = []string{"rr", "wrr", "lc", "wlc", "lblc", "lblcr", "dh", "sh", "sed", "nq", "fo", "ovf", "mh", "twos"}

// ValidScheduler reports whether name is an IPVS scheduler.
func ValidScheduler(name string) bool { return slices.Contains(schedulers, name) }

type renderOptions struct {
	families  []dataplane.Family
	scheduler string
}

// renderer holds one render call for one family.
type renderer struct {
	w         *desired
	fam       dataplane.Family
	sched     string
	nodeIPs   []netip.Addr // the node IPs node ports are served on
	cidrs     []netip.Prefix
	masqAll   bool
	owner     map[VSKey]string // service that claimed a virtual server
	skipsSeen map[dataplane.Skip]bool
}

// render turns a node's state into the model this mode wants. It does no
// I/O and is deterministic. Bad input is skipped and listed in skips.
func render(st *dataplane.State, o renderOptions) *desired {
	w := &desired{model: newModel(), nodeIPs: map[netip.Addr]bool{}, udp: map[dataplane.Family]map[string]conntrack.UDPPort{}}
	seen := map[dataplane.Skip]bool{}
	sched := o.scheduler
	if s := st.Config.GetIpvsScheduler(); s != "" {
		if ValidScheduler(s) {
			sched = s
		} else {
			w.skips = append(w.skips, dataplane.Skip{Reason: fmt.Sprintf("node config: unknown IPVS scheduler %q, using %s", s, sched)})
		}
	}
	names := sorted.Keys(st.Services)
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
	s := dataplane.Skip{Service: svc, Reason: fmt.Sprintf(format, args...)}
	if !r.skipsSeen[s] {
		r.skipsSeen[s] = true
		r.w.skips = append(r.w.skips, s)
	}
}

// readNode reads the NodeConfig as every mode does. Node ports get a
// virtual server on each node IP that node_port_addresses selects (all
// of them by default, kube-proxy's ipvs default being every local
// address): IPVS needs one per address, and this mode lists no kernel
// addresses, so the Node's addresses are the ones it knows. Every node
// IP still marks its node-port virtual servers as this mode's, so those
// on a node IP the list no longer selects are removed.
func (r *renderer) readNode(cfg *switchyardv1.NodeConfig) {
	n := serviceport.ReadNode(cfg, r.fam, serviceport.NodePortsAll, func(svc, reason string) {
		r.skip(svc, "%s", reason)
	})
	r.cidrs = n.ClusterCIDRs
	for _, a := range n.NodeIPs {
		r.w.nodeIPs[a] = true
		if n.NodePorts.Matches(a) && !slices.Contains(r.nodeIPs, a) {
			r.nodeIPs = append(r.nodeIPs, a)
		}
	}
}

// portPlan is one service port in one family, as serviceport read and
// decided it, with its endpoints as real servers.
type portPlan struct {
	sp         *serviceport.Port
	svc, id    string
	proto      dataplane.Protocol
	port, node uint16
	// internal and external are the real servers of sp.Internal and
	// sp.External.
	internal, external []RealServer
}

// service renders every port of one view; serviceport reads it exactly as
// for the iptables and nftables modes.
func (r *renderer) service(key string, sv *switchyardv1.ServiceView) {
	svc, ok := serviceport.Read(key, sv, r.fam, func(service, reason string) {
		r.skip(service, "%s", reason)
	})
	if !ok {
		return
	}
	if hc := svc.HealthCheckNodePort; hc > 0 {
		r.member(setHealthCheck, strconv.Itoa(int(hc)))
	}
	for i := range svc.Ports {
		sp := &svc.Ports[i]
		proto := sp.Protocol
		p := portPlan{
			sp: sp, svc: svc.Name, id: svc.Name + ":" + sp.Name + "/" + sp.Protocol.String(),
			proto: proto, port: uint16(sp.Port), node: uint16(sp.NodePort),
			internal: realServers(sp.Internal.Endpoints), external: realServers(sp.External.Endpoints),
		}
		r.port(&p)
	}
}

// realServers turns endpoints into real servers. Terminating endpoints get
// weight 0 when the set also has endpoints that are not terminating (they
// drain); a set of only terminating ones is the control plane's serving
// fallback and gets weight 1.
func realServers(eps []serviceport.Endpoint) []RealServer {
	active := slices.ContainsFunc(eps, func(ep serviceport.Endpoint) bool { return !ep.Terminating })
	out := make([]RealServer, 0, len(eps))
	for _, ep := range eps {
		w := 1
		if active && ep.Terminating {
			w = 0
		}
		out = append(out, RealServer{Addr: ep.Addr, Weight: w})
	}
	return out
}

// ipPort is the hash:ip,port member for a, p.
func ipPort(a netip.Addr, p dataplane.Protocol, port uint16) string {
	return fmt.Sprintf("%s,%s:%d", a, p.String(), port)
}

// blockSet is the set whose members a fixed filter rule rejects or drops,
// for traffic no endpoint takes.
func blockSet(v serviceport.Verdict) string {
	if v == serviceport.Drop {
		return setDrop
	}
	return setReject
}

// port renders one service port: virtual servers, addresses, members.
func (r *renderer) port(p *portPlan) {
	sp := p.sp
	// dst adds the virtual server for one address, or blocks the address.
	dst := func(a netip.Addr, port uint16, eps []RealServer, block string, bind bool) {
		key := VSKey{Addr: a, Port: port, Protocol: p.proto}
		if o, taken := r.owner[key]; taken && o != p.svc {
			r.skip(p.svc, "%s is already a port of %s", key, o)
			return
		}
		r.owner[key] = p.svc
		vm := &vsModel{vs: r.virtualServer(key, sp), rs: map[netip.AddrPort]RealServer{}}
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
	intBlock, extBlock := blockSet(sp.Internal.NoEndpoints), blockSet(sp.External.NoEndpoints)
	for _, a := range sp.ClusterIPs {
		dst(a, p.port, p.internal, intBlock, true)
		r.member(setClusterIP, ipPort(a, p.proto, p.port))
	}
	ext, lb := setExternalIP, setLB
	if sp.External.Local {
		ext, lb = setExternalLocal, setLBLocal
	}
	for _, a := range sp.ExternalIPs {
		dst(a, p.port, p.external, extBlock, true)
		r.member(ext, ipPort(a, p.proto, p.port))
	}
	for _, a := range sp.LBIPs {
		dst(a, p.port, p.external, extBlock, true)
		r.member(lb, ipPort(a, p.proto, p.port))
		if sp.HasRanges {
			r.member(setLBFW, ipPort(a, p.proto, p.port))
			for _, src := range sp.SourceRanges {
				r.member(setLBSource, ipPort(a, p.proto, p.port)+","+netMember(src))
			}
		}
	}
	if p.node > 0 {
		if len(r.nodeIPs) == 0 && len(sp.ClusterIPs) > 0 {
			r.skip(p.svc, "node port %d: NodeConfig has no %s node IP that serves node ports", p.node, r.fam)
		}
		set := nodePortSet(p.proto, sp.External.Local)
		r.member(set, strconv.Itoa(int(p.node)))
		for _, a := range r.nodeIPs {
			dst(a, p.node, p.external, extBlock, false)
		}
	}
	var eps []RealServer
	eps = append(append(eps, p.internal...), p.external...)
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
	if p.proto != dataplane.UDP {
		return
	}
	u := conntrack.UDPPort{NodePort: p.node}
	for _, list := range [][]netip.Addr{p.sp.ClusterIPs, p.sp.ExternalIPs, p.sp.LBIPs} {
		for _, a := range list {
			u.Dsts = append(u.Dsts, netip.AddrPortFrom(a, p.port))
		}
	}
	for _, rs := range eps {
		u.AddEndpoint(rs.Addr)
	}
	sort.Slice(u.Endpoints, func(i, j int) bool { return u.Endpoints[i].Compare(u.Endpoints[j]) < 0 })
	r.w.udp[r.fam][p.id] = u
}

// virtualServer is the virtual server of one address of a port: the
// port's algorithm as IPVS's scheduler (round-robin rr, maglev mh hashing
// the client's port too, source-hash sh), else the node's scheduler
// (random included: IPVS has no random scheduler).
func (r *renderer) virtualServer(key VSKey, sp *serviceport.Port) VirtualServer {
	vs := VirtualServer{Key: key, Scheduler: r.sched, Timeout: sp.Affinity}
	switch sp.Algorithm {
	case serviceport.RoundRobin:
		vs.Scheduler = "rr"
	case serviceport.Maglev:
		vs.Scheduler, vs.HashPort = "mh", true
	case serviceport.SourceHash:
		vs.Scheduler = "sh"
	}
	return vs
}
