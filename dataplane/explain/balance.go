package explain

import (
	"fmt"
	"net/netip"

	"github.com/switchyard-proxy/switchyard/dataplane/serviceport"
)

// balance says how the port's algorithm picks among eps (its set, whose
// table is tab) in this mode. A hashed pick through the control plane's
// table is exact when the packet names its client (the port too, for
// maglev): one endpoint, the same from every node. Without the client's
// port a maglev answer gives each endpoint its share of the table's
// slots, as a tracer enumerating the hash would.
func (e *explainer) balance(p *serviceport.Port, eps []serviceport.Endpoint, tab *serviceport.Table, v Verdict) Verdict {
	alg := p.Algorithm
	note := func(format string, args ...any) { v.Notes = append(v.Notes, fmt.Sprintf(format, args...)) }
	switch {
	case alg == serviceport.ModeDefault || alg == serviceport.Random,
		alg == serviceport.RoundRobin && e.tr.inTurn:
		return v
	case alg == serviceport.RoundRobin && e.tr.roundRobin && !(p.Affinity > 0 && e.tr.affinityPicksAtRandom):
		note("round-robin: new connections take the endpoints in turn (each node keeps its own turn)")
	case alg.Hashed() && e.tr.kernelHash:
		sched := "mh"
		if alg == serviceport.SourceHash {
			sched = "sh"
		}
		note("%s: the IPVS scheduler %s hashes the client with the kernel's own table (the same on every node with the same endpoints)", alg, sched)
	case alg.Hashed() && e.tr.maglevTables && tab != nil && !(p.Affinity > 0 && e.tr.affinityPicksAtRandom):
		if alg == serviceport.SourceHash || e.pkt.SrcPort != 0 {
			i := tab.Pick(alg, netip.AddrPortFrom(e.pkt.Src, e.pkt.SrcPort))
			v.Endpoints = []Share{{Endpoint: eps[i].Addr, Share: 1}}
			note("%s: this client hashes to %s of %d slots, the same from every node", alg, eps[i].Addr, len(tab.Slots))
			return v
		}
		addrs := make([]netip.AddrPort, len(eps))
		for i, ep := range eps {
			addrs[i] = ep.Addr
		}
		v.Endpoints = TableShares(tab, addrs)
		note("%s: the endpoint depends on the client's port too; shares are the table's %d slots (give the source port for the one endpoint)", alg, len(tab.Slots))
	case p.Affinity > 0 && e.tr.affinityPicksAtRandom:
		note("%s with ClientIP affinity: in the %s mode a new client's first pick is random", alg, e.mode)
	case e.tr.inTurn:
		note("%s is not available in the %s mode: round robin (reported as a skip)", alg, e.mode)
	default:
		note("%s is not available in the %s mode: random (reported as a skip)", alg, e.mode)
	}
	return v
}

// TableShares is each endpoint's share of tab's slots (eps in the order
// the slots index), sorted; an endpoint owning no slot is left out. It is
// what a hashed pick gives a client whose port is not known.
func TableShares(tab *serviceport.Table, eps []netip.AddrPort) []Share {
	counts := make([]int, len(eps))
	for _, s := range tab.Slots {
		counts[s]++
	}
	var out []Share
	for i, ep := range eps {
		if counts[i] > 0 {
			out = append(out, Share{Endpoint: ep, Share: float64(counts[i]) / float64(len(tab.Slots))})
		}
	}
	return SortShares(out)
}
