package nftables

import (
	"fmt"
	"net/netip"
	"slices"
	"strconv"
	"time"

	"sigs.k8s.io/knftables"

	"github.com/switchyard-proxy/switchyard/dataplane/serviceport"
	switchyardv1 "github.com/switchyard-proxy/switchyard/proto/switchyard/v1"
)

// endpoint is one backend of one service port in one family.
type endpoint struct {
	addr     netip.AddrPort
	chain    string // ep-…
	affinity string // affinity-… set, when the service has ClientIP affinity
}

// portPlan is one service port as serviceport read it, with the names
// of its objects and its endpoints' names.
type portPlan struct {
	sp             *serviceport.Port
	names          portNames
	cluster, local []endpoint
}

// service renders every port of one view; serviceport reads it exactly as
// for the iptables and ipvs modes.
func (r *renderer) service(key string, sv *switchyardv1.ServiceView) {
	svc, ok := serviceport.Read(key, sv, r.fam, r.skipReason)
	if !ok {
		return
	}
	for i := range svc.Ports {
		sp := &svc.Ports[i]
		p := portPlan{sp: sp, names: namesFor(svc.Namespace, svc.ServiceName, sp.Name, sp.Protocol)}
		p.cluster = endpointsOf(&p, sp.Cluster)
		p.local = endpointsOf(&p, sp.Local)
		r.port(&p)
	}
}

// endpointsOf names the objects of each endpoint of one service port.
func endpointsOf(p *portPlan, eps []serviceport.Endpoint) []endpoint {
	out := make([]endpoint, 0, len(eps))
	for _, ep := range eps {
		e := endpoint{addr: ep.Addr, chain: p.names.endpointChain(ep.Addr)}
		if p.sp.Affinity > 0 {
			e.affinity = p.names.affinitySet(ep.Addr, p.sp.Affinity)
		}
		out = append(out, e)
	}
	return out
}

// port renders one service port as serviceport decided it: map elements
// for its addresses and node port, and its chains.
func (r *renderer) port(p *portPlan) {
	rs, n, sp := r.rs, p.names, p.sp
	intChain := n.svc
	if sp.Internal.Local {
		intChain = n.local
	}
	intBlock, extBlock := noEndpointVerdict(sp.Internal.NoEndpoints), noEndpointVerdict(sp.External.NoEndpoints)
	port, proto := fmt.Sprint(sp.Port), sp.Protocol.String()

	for _, ip := range sp.ClusterIPs {
		rs.element(setClusterIPs, "", ip.String())
		if sp.Internal.Serves() {
			rs.element(mapServiceIPs, "goto "+intChain, ip.String(), proto, port)
		} else {
			rs.element(mapNoEPServices, intBlock, ip.String(), proto, port)
		}
	}
	// Under an external Local policy without local endpoints external
	// addresses get both: ext-… short-circuits node and pod traffic, and
	// what it does not DNAT meets the no-endpoint verdict of the filter
	// hooks (which never see traffic ext-… DNATed).
	for _, ip := range append(slices.Clone(sp.ExternalIPs), sp.LBIPs...) {
		if sp.UsesExternal() {
			rs.element(mapServiceIPs, "goto "+n.ext, ip.String(), proto, port)
		}
		if !sp.External.Serves() {
			rs.element(mapNoEPServices, extBlock, ip.String(), proto, port)
		}
	}
	if p.sp.HasRanges && len(p.sp.LBIPs) > 0 {
		for _, ip := range p.sp.LBIPs {
			rs.element(mapFirewallIPs, "goto "+n.fw, ip.String(), proto, port)
		}
		// Allowed sources return to the base chain; the rest is dropped
		// before DNAT. One rule per range rather than an anonymous set.
		rs.chain(n.fw)
		for _, src := range p.sp.SourceRanges {
			rs.addText(n.fw, ipKeyword(r.fam), "saddr", src.String(), "return")
		}
		rs.add(n.fw, dropIt())
	}
	if sp.NodePort > 0 {
		np := fmt.Sprint(sp.NodePort)
		if sp.UsesExternal() {
			rs.element(mapServiceNPs, "goto "+n.ext, proto, np)
		}
		if !sp.External.Serves() {
			rs.element(mapNoEPNodePort, extBlock, proto, np)
		}
	}

	if len(p.cluster) > 0 {
		r.clusterChain(p)
	}
	if sp.UsesLocal() {
		if sp.Internal.Local {
			r.clusterIPMasq(p, n.local)
		}
		r.balance(p, n.local, p.local, sp.LocalTable)
	}
	if sp.UsesExternal() {
		r.extChain(p)
	}
	r.endpointChains(p, p.cluster)
	if sp.UsesLocal() {
		r.endpointChains(p, p.local)
	}
	if u, ok := sp.UDPFlows(); ok {
		r.rs.udp[p.names.id] = u
	}
}

// noEndpointVerdict is the no-endpoint map's verdict for traffic no
// endpoint takes: the reject chain (TCP reset, ICMP otherwise) or drop.
func noEndpointVerdict(v serviceport.Verdict) string {
	if v == serviceport.Drop {
		return "drop"
	}
	return "goto " + chainReject
}

// clusterChain writes svc-…: masquerade off-cluster sources of the cluster
// IPs when internal traffic uses it, then balance.
func (r *renderer) clusterChain(p *portPlan) {
	c := p.names.svc
	if !p.sp.Internal.Local {
		r.clusterIPMasq(p, c)
	}
	r.balance(p, c, p.cluster, p.sp.ClusterTable)
}

// clusterIPMasq writes into the chain internal traffic takes (svc-…, or
// local-… under internalTrafficPolicy Local, as kube-proxy writes them
// into its internal traffic chain) the masquerade of off-cluster sources
// of the cluster IPs, so replies come back through this node. Only the
// cluster IPs match: external traffic through local-… is not affected.
func (r *renderer) clusterIPMasq(p *portPlan, c string) {
	r.rs.chain(c)
	for _, a := range p.sp.ClusterIPs {
		switch {
		case r.node.MasqueradeAll:
			r.rs.add(c, addrIs(true, a), jumpTo(chainMarkMasq))
		case len(r.node.ClusterCIDRs) > 0:
			r.rs.add(c, addrIs(true, a), addrNotIn(false, setClusterCIDRs), jumpTo(chainMarkMasq))
		}
	}
}

// balance writes the choice over eps into chain. Without affinity the
// chain holds one rule that changes only with the algorithm's modulus,
// and the endpoints are elements of a map in the chain's block of 65,536
// keys (slots.go):
//
//   - random (and each mode's default): "dnat to numgen random mod 65536
//     offset <block> map @endpoints-<proto>-<shard>", each endpoint an
//     equal range of the block, so the rule never changes;
//   - round-robin: "numgen inc mod <n>", endpoint i the key block+i;
//   - maglev and source-hash: "jhash <client> mod <size> seed <seed>"
//     into @maglev-<proto>-<shard>, slot i the key block+i, its endpoint
//     the table's (serviceport.Table, computed by the control plane).
//
// An endpoint change is then data only: the kernel validates every
// chain reachable through a verdict map when a commit adds a rule or a
// jump, which cost ~60 ms at 5,000 services, and it does nothing of the
// kind for elements of a data map. With affinity the chain keeps a
// cascade to per-endpoint chains, which record the client in their own
// set: rule i matches with probability 1/(n-i), so each endpoint gets
// 1/n; a new client's first pick is then random whatever the algorithm
// (reported), as the per-endpoint chains are what records it. Neither
// uses an anonymous set: "numgen random mod n vmap { … }" per service
// costs the kernel O(sets) per set at load (214 s for 10,000 services,
// kernel-facts.md).
func (r *renderer) balance(p *portPlan, chain string, eps []endpoint, tab *serviceport.Table) {
	r.rs.chain(chain)
	alg := p.sp.Algorithm
	if p.sp.Affinity == 0 {
		block, err := r.slots.block(p.sp.Protocol, chain)
		if err != nil {
			r.skip(p.names.base, "%v: rejected", err)
			r.rs.add(chain, gotoTo(chainReject))
			return
		}
		r.rs.blocks[chain] = true
		off := block * slots
		switch {
		case alg.Hashed() && tab != nil:
			r.maglev(p, chain, eps, tab, block)
		case alg == serviceport.RoundRobin:
			m := endpointMap(p.sp.Protocol, block)
			for i, ep := range eps {
				k := fmt.Sprint(off + uint32(i))
				r.rs.element(m, endpointValue(ep), k+"-"+k)
			}
			r.rs.addText(chain, "meta l4proto", p.sp.Protocol.String(), "dnat", ipKeyword(r.fam), "addr . port to numgen inc mod",
				fmt.Sprint(len(eps)), "offset", fmt.Sprint(off), "map @"+m)
		default:
			m := endpointMap(p.sp.Protocol, block)
			for i, ep := range eps {
				lo, hi := off+uint32(i*slots/len(eps)), off+uint32((i+1)*slots/len(eps))-1
				r.rs.element(m, endpointValue(ep), fmt.Sprintf("%d-%d", lo, hi))
			}
			r.rs.add(chain, l4proto(p.sp.Protocol.String()), dnatThrough(off, m))
		}
		return
	}
	if alg != serviceport.ModeDefault && alg != serviceport.Random {
		r.skip(p.names.base, "%s with ClientIP affinity: a new client's first pick is random in the nftables mode", alg)
	}
	for _, ep := range eps {
		r.rs.add(chain, addrIn(false, ep.affinity), gotoTo(ep.chain))
	}
	for i, ep := range eps {
		if left := len(eps) - i; left > 1 {
			r.rs.add(chain, numgenZero(uint32(left)), gotoTo(ep.chain))
		} else {
			r.rs.add(chain, gotoTo(ep.chain))
		}
	}
}

// maglev writes a hashed choice: one element per slot of the table in
// the chain's block of its Maglev map, and the rule that hashes the
// client (address and port for maglev, address alone for source-hash)
// with the table's seed. The rule states the seed even when it is 0:
// without one the kernel draws a random seed per rule, and nodes would
// disagree.
func (r *renderer) maglev(p *portPlan, chain string, eps []endpoint, tab *serviceport.Table, block uint32) {
	off := block * slots
	m := maglevMap(p.sp.Protocol, block)
	if r.rs.Elements[m] == nil {
		// Sized once: growing a map slot by slot was half this loop.
		r.rs.Elements[m] = make(map[string]string, len(tab.Slots))
	}
	// One value string per endpoint, shared by its hundreds of slots.
	values := make([]string, len(eps))
	for i, ep := range eps {
		values[i] = endpointValue(ep)
	}
	for slot, i := range tab.Slots {
		r.rs.element(m, values[i], strconv.FormatUint(uint64(off)+uint64(slot), 10))
	}
	ip, proto := ipKeyword(r.fam), p.sp.Protocol.String()
	key := ip + " saddr . " + proto + " sport"
	if p.sp.Algorithm == serviceport.SourceHash {
		key = ip + " saddr"
	}
	r.rs.addText(chain, "meta l4proto", proto, "dnat", ip, "addr . port to jhash", key, "mod", fmt.Sprint(len(tab.Slots)),
		fmt.Sprintf("seed 0x%08x", tab.Seed), "offset", fmt.Sprint(off), "map @"+m)
}

// endpointValue is an endpoint map element's value: "ADDR . PORT".
func endpointValue(ep endpoint) string {
	return ep.addr.Addr().String() + " . " + fmt.Sprint(ep.addr.Port())
}

// extChain writes ext-…: masquerade and choose the policy chain.
// Under a Local policy without local endpoints only the short-circuits
// to svc-… remain.
func (r *renderer) extChain(p *portPlan) {
	ext, n := p.names.ext, p.names
	r.rs.chain(ext)
	if !p.sp.External.Local {
		r.rs.add(ext, jumpTo(chainMarkMasq))
		r.rs.add(ext, gotoTo(n.svc))
		return
	}
	short := p.sp.ShortCircuit
	if short && len(r.node.ClusterCIDRs) > 0 {
		// Pod traffic to an external address is not subject to the policy.
		r.rs.add(ext, addrIn(false, setClusterCIDRs), gotoTo(n.svc))
	}
	r.rs.addText(ext, "fib saddr type local jump", chainMarkMasq)
	if short {
		r.rs.addText(ext, "fib saddr type local goto", n.svc)
	}
	if p.sp.External.Serves() {
		r.rs.add(ext, gotoTo(n.local))
	}
}

// endpointChains adds every endpoint to the hairpin set and, for a
// service with affinity, writes one ep-… chain per endpoint: affinity
// record, DNAT.
func (r *renderer) endpointChains(p *portPlan, eps []endpoint) {
	for _, ep := range eps {
		a := ep.addr.Addr().String()
		r.rs.element(setHairpin, "", a, a)
		if p.sp.Affinity == 0 {
			continue
		}
		if _, done := r.rs.Chains[ep.chain]; done {
			continue
		}
		r.rs.set(&Set{Name: ep.affinity, Type: addrType(r.fam), Dynamic: true,
			Flags:   []knftables.SetFlag{knftables.DynamicFlag, knftables.TimeoutFlag},
			Timeout: time.Duration(p.sp.Affinity) * time.Second})
		r.rs.add(ep.chain, updateSaddr(ep.affinity))
		r.rs.add(ep.chain, l4proto(p.sp.Protocol.String()), dnatTo(ep.addr))
	}
}
