package ipvstest

import (
	"fmt"
	"net/netip"
	"slices"

	"github.com/switchyard-proxy/switchyard/dataplane/explain"
	"github.com/switchyard-proxy/switchyard/dataplane/internal/sorted"
	"github.com/switchyard-proxy/switchyard/dataplane/iptables/iptablestest"
	"github.com/switchyard-proxy/switchyard/dataplane/ipvs"
)

// Trace says what the kernel f holds does with the first packet of a
// connection, on a node whose own addresses are nodeIPs: the ipvs mode's
// packet tracer. The packet walks the iptables rules (iptablestest's
// Stack, matching the ipsets here) and meets IPVS where its hooks sit:
// at LOCAL_IN after filter INPUT for a packet from the network, at
// LOCAL_OUT after nat OUTPUT for the node's own. Local addresses are the
// node IPs, loopback and every address on a link (kube-ipvs0 binds the
// service addresses, which is why they reach LOCAL_IN at all).
func (f *Fake) Trace(pkt explain.Packet, nodeIPs []netip.Addr) (explain.Verdict, error) {
	fam := iptablestest.FamilyName(pkt.IPv6())
	w := &iptablestest.Walker{
		Rules: func(table, chain string) ([]string, bool) { return f.ipt.Rules(fam, table, chain) },
		Sets:  iptablestest.SetsByName(f.sets.Sets()),
		Local: iptablestest.Local(append(slices.Clone(nodeIPs), f.linkAddrs()...)...),
	}
	s := iptablestest.Stack{Walker: w, Balance: f.balance}
	return s.Trace(pkt)
}

// linkAddrs lists the addresses of every link.
func (f *Fake) linkAddrs() []netip.Addr {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []netip.Addr
	for _, n := range sorted.Keys(f.links) {
		out = append(out, sorted.KeysFunc(f.links[n].addrs, netip.Addr.Compare)...)
	}
	return out
}

// balance is IPVS for the Stack: a packet to a virtual server goes to
// its real servers of weight above 0, each with its weight's share of
// the connections (every scheduler balances by weight over time; rr
// treats equal weights alike). A virtual server without one refuses the
// connection as ip_vs_leave does, with ICMP port unreachable.
func (f *Fake) balance(b iptablestest.Branch) ([]iptablestest.Branch, bool, error) {
	key := ipvs.VSKey{Addr: b.Pkt.Dst, Port: b.Pkt.Port, Protocol: b.Pkt.Protocol}
	f.mu.Lock()
	v, ok := f.vs[key]
	var vs ipvs.VirtualServer
	var rss []ipvs.RealServer
	if ok {
		vs = v.vs
		for _, a := range sorted.KeysFunc(v.rs, netip.AddrPort.Compare) {
			rss = append(rss, v.rs[a])
		}
	}
	f.mu.Unlock()
	if !ok {
		return nil, false, nil
	}
	b = b.Step("ipvs " + vsDesc(vs))
	total := 0
	for _, rs := range rss {
		total += max(rs.Weight, 0)
	}
	if total == 0 {
		b = b.Step("no real server of weight above 0: ICMP port unreachable")
		b.Target = "REJECT"
		return []iptablestest.Branch{b}, true, nil
	}
	out := make([]iptablestest.Branch, 0, len(rss))
	for _, rs := range rss {
		if rs.Weight <= 0 {
			continue
		}
		o := b.Step(fmt.Sprintf("-> %s weight %d", rs.Addr, rs.Weight))
		o.Pkt.Dst, o.Pkt.Port, o.Endpoint = rs.Addr.Addr(), rs.Addr.Port(), rs.Addr
		o.Share *= float64(rs.Weight) / float64(total)
		o.Affinity = max(o.Affinity, vs.Timeout)
		out = append(out, o)
	}
	return out, true, nil
}
