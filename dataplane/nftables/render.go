package nftables

import (
	"errors"
	"fmt"

	"sigs.k8s.io/knftables"

	"github.com/switchyard-proxy/switchyard/dataplane"
	"github.com/switchyard-proxy/switchyard/dataplane/internal/sorted"
	"github.com/switchyard-proxy/switchyard/dataplane/serviceport"
)

// renderer holds the state of one Render call.
type renderer struct {
	fam   dataplane.Family
	node  serviceport.Node // the NodeConfig read for the family
	rs    *Ruleset
	slots *slotRanges
	// flow: render the flowtable and its rule (flowtable.go).
	flow bool
}

// Render turns a node's state into the table of one family. It does no
// I/O and is deterministic. Bad input is skipped and recorded in
// Ruleset.Skips; the result never references a missing chain or set.
func Render(st *dataplane.State, fam dataplane.Family) (*Ruleset, error) {
	return render(st, fam, nil, len(flowPatterns(st)) > 0)
}

// renderWith is Render with the blocks of an existing allocator, for
// tests that compare a fresh render with an incremental one.
func renderWith(st *dataplane.State, fam dataplane.Family, slots *slotRanges) (*Ruleset, error) {
	return render(st, fam, &Memo{slots: slots}, len(flowPatterns(st)) > 0)
}

// render is Render reusing the unchanged services' objects from memo
// (when not nil); then only the services rendered anew are validated.
// flow renders the flowtable (the setting is on and the kernel has
// flowtables).
func render(st *dataplane.State, fam dataplane.Family, memo *Memo, flow bool) (*Ruleset, error) {
	r := &renderer{fam: fam, rs: newRuleset(fam), slots: newSlotRanges(), flow: flow}
	if memo != nil {
		if memo.slots == nil {
			memo.slots = newSlotRanges()
		}
		r.slots = memo.slots
	}
	r.readNode(st)
	r.fixed()
	r.flowtable()
	if memo == nil {
		for _, n := range sorted.Keys(st.Services) {
			r.service(n, st.Services[n])
		}
		if err := r.rs.Validate(); err != nil {
			return nil, fmt.Errorf("render %s: %w", fam, err)
		}
		return r.rs, nil
	}
	memo.Reset(r.memoKey())
	if memo.last != nil {
		r.rs.presize(memo.last)
	}
	var fresh []*fragment
	for f, isNew := range memo.Fragments(st.Services, r.renderFragment) {
		if isNew {
			fresh = append(fresh, f)
		}
		r.replay(f)
	}
	var errs []error
	for _, f := range fresh {
		errs = append(errs, validateFragment(f, r.rs))
	}
	if err := errors.Join(errs...); err != nil {
		memo.Forget() // start over next time
		return nil, fmt.Errorf("render %s: %w", fam, err)
	}
	memo.KeepOnly(st.Services) // services gone from st are forgotten
	memo.last = r.rs
	r.slots.keep(func(chain string) bool { return r.rs.blocks[chain] })
	return r.rs, nil
}

func (r *renderer) skip(svc, format string, args ...any) {
	r.skipReason(svc, fmt.Sprintf(format, args...))
}

func (r *renderer) skipReason(svc, reason string) {
	r.rs.Skips = append(r.rs.Skips, dataplane.Skip{Service: svc, Reason: reason})
}

func (r *renderer) readNode(st *dataplane.State) {
	// Node ports answer on the node's primary addresses unless the
	// control plane says otherwise: kube-proxy's nftables default.
	r.node = serviceport.ReadNode(st.Config, dataplane.Family(r.fam), serviceport.NodePortsPrimary, r.skipReason)
}

// Base chain priorities as numbers: nft 1.0.6 refuses the name "dstnat"
// in the output hook.
const (
	prioDNAT       knftables.BaseChainPriority = "-100"
	prioSNAT       knftables.BaseChainPriority = "100"
	prioFilter     knftables.BaseChainPriority = "0"
	prioPreDNATFlt knftables.BaseChainPriority = "-110"
)

// fixed writes the objects that exist whatever the services are: base
// chains, the dispatch chains and the maps they look up.
func (r *renderer) fixed() {
	rs, ip, at := r.rs, ipKeyword(r.fam), addrType(r.fam)
	base := func(name string, t knftables.BaseChainType, h knftables.BaseChainHook, p knftables.BaseChainPriority, rules ...string) {
		c := rs.chain(name)
		c.Type, c.Hook, c.Priority = t, h, p
		for _, text := range rules {
			c.Rules = append(c.Rules, textRule(text))
		}
	}
	jump := func(name string, t knftables.BaseChainType, h knftables.BaseChainHook, p knftables.BaseChainPriority, to string) {
		base(name, t, h, p)
		rs.add(name, jumpTo(to))
	}
	const fresh = "ct state new "
	jump(chainNatPrerouting, knftables.NATType, knftables.PreroutingHook, prioDNAT, chainServices)
	jump(chainNatOutput, knftables.NATType, knftables.OutputHook, prioDNAT, chainServices)
	jump(chainNatPostrouting, knftables.NATType, knftables.PostroutingHook, prioSNAT, chainMasquerading)
	// Reject and drop happen in filter hooks after routing: a packet to a
	// service without endpoints is never DNATed, so it reaches input (node
	// port), forward (from a pod or client) or output (from the node).
	base(chainFilterInput, knftables.FilterType, knftables.InputHook, prioFilter,
		fresh+"jump "+chainNodePortChk, fresh+"jump "+chainServiceCheck)
	// Then what is left addressed to the service ranges (after DNAT:
	// served ports no longer are), as kube-proxy's cluster-ips-check.
	base(chainFilterForward, knftables.FilterType, knftables.ForwardHook, prioFilter,
		fresh+"jump "+chainServiceCheck, fresh+"jump "+chainClusterIPsChk)
	base(chainFilterOutput, knftables.FilterType, knftables.OutputHook, prioFilter,
		fresh+"jump "+chainServiceCheck, fresh+"jump "+chainClusterIPsChk)
	// Source ranges are checked before DNAT, on the load-balancer address.
	base(chainFilterPreDNAT, knftables.FilterType, knftables.PreroutingHook, prioPreDNATFlt, fresh+"jump "+chainFirewallChk)
	base(chainFilterOutPreDNA, knftables.FilterType, knftables.OutputHook, prioPreDNATFlt, fresh+"jump "+chainFirewallChk)

	vmap := func(name, key string) { rs.set(&Set{Name: name, Map: true, Type: key + " : verdict"}) }
	svcKey := at + " . inet_proto . inet_service"
	vmap(mapServiceIPs, svcKey)
	vmap(mapServiceNPs, "inet_proto . inet_service")
	vmap(mapNoEPServices, svcKey)
	vmap(mapNoEPNodePort, "inet_proto . inet_service")
	vmap(mapFirewallIPs, svcKey)
	rs.set(&Set{Name: setClusterCIDRs, Type: at, Flags: []knftables.SetFlag{knftables.IntervalFlag}})
	for _, p := range r.node.ClusterCIDRs {
		rs.element(setClusterCIDRs, "", p.String())
	}

	// Hairpin: a packet DNATed back to the endpoint that sent it leaves
	// with source == destination; masquerade it so the reply comes back
	// through this node. One set of endpoint pairs, filled as endpoints
	// come and go, instead of a rule per endpoint: an endpoint change is
	// then data only (see balance).
	rs.set(&Set{Name: setHairpin, Type: at + " . " + at})
	rs.addText(chainMasquerading, ip, "saddr .", ip, "daddr @"+setHairpin, "jump", chainMarkMasq)
	rs.addText(chainMarkMasq, "mark set mark or", masqMark)
	for _, proto := range endpointProtocols {
		for shard := range uint32(endpointShards) {
			rs.set(&Set{Name: endpointMap(proto, shard), Map: true, Flags: []knftables.SetFlag{knftables.IntervalFlag},
				TypeOf: endpointMapTypeOf(r.fam, proto)})
			rs.set(&Set{Name: maglevMap(proto, shard), Map: true, TypeOf: endpointMapTypeOf(r.fam, proto)})
		}
	}
	rs.addText(chainMasquerading, "mark and", masqMark, "!= 0 mark set mark xor", masqMark, "masquerade fully-random")
	// TCP gets a reset: an ICMP error to a connect() on this node is only
	// acted on at the SYN retransmit (1–2 s, measured in the iptables mode).
	rs.addText(chainReject, "meta l4proto tcp reject with tcp reset")
	rs.addText(chainReject, "reject")

	rs.addText(chainServices, ip, "daddr . meta l4proto . th dport vmap @"+mapServiceIPs)
	rs.addText(chainServiceCheck, ip, "daddr . meta l4proto . th dport vmap @"+mapNoEPServices)
	rs.addText(chainFirewallChk, ip, "daddr . meta l4proto . th dport vmap @"+mapFirewallIPs)
	r.serviceRanges()
	for _, onNode := range r.nodePortMatches() {
		rs.addText(chainServices, onNode, "meta l4proto . th dport vmap @"+mapServiceNPs)
		rs.addText(chainNodePortChk, onNode, "meta l4proto . th dport vmap @"+mapNoEPNodePort)
	}
}

// nodePortMatches declares what selects the local addresses node ports
// answer on (serviceport.NodePorts) and returns the matches, one rule
// each: every local address but loopback (loopback node ports would
// need route_localnet); the node's primary addresses, as they are; the
// local addresses inside CIDRs, loopback already cut out of them. The
// CIDRs are matched with "fib daddr type local" rather than by listing
// the node's interfaces as kube-proxy does, so an address added later
// is served without a resync and rendering reads no kernel state; they
// are a set of their own (an interval set) so the default, addresses
// only, stays a plain set.
func (r *renderer) nodePortMatches() []string {
	rs, ip, at, np := r.rs, ipKeyword(r.fam), addrType(r.fam), r.node.NodePorts
	if np.All {
		return []string{"fib daddr type local " + notLocalhost(r.fam)}
	}
	var out []string
	if len(np.Addrs) > 0 {
		rs.set(&Set{Name: setNodePortIPs, Type: at})
		for _, a := range np.Addrs {
			rs.element(setNodePortIPs, "", a.String())
		}
		out = append(out, ip+" daddr @"+setNodePortIPs)
	}
	if len(np.Prefixes) > 0 {
		rs.set(&Set{Name: setNodePortCIDRs, Type: at, Flags: []knftables.SetFlag{knftables.IntervalFlag}})
		for _, p := range np.Prefixes {
			rs.element(setNodePortCIDRs, "", p.String())
		}
		out = append(out, "fib daddr type local "+ip+" daddr @"+setNodePortCIDRs)
	}
	return out
}

// serviceRanges writes cluster-ips-check, as kube-proxy's nftables mode
// does: traffic still addressed to a cluster IP after DNAT is to a port
// the service does not serve and is rejected (the services fill
// @cluster-ips); traffic to any other address of the cluster's Service
// ranges (ServiceCIDR objects) is to no service and is dropped, never
// routed on. Dropped, not rejected, as upstream: a Service whose rules
// are not programmed yet looks like a lost SYN, which the client
// retries, rather than a refusal. Without service CIDRs the set is
// empty and only the first rule acts.
func (r *renderer) serviceRanges() {
	rs, at := r.rs, addrType(r.fam)
	rs.set(&Set{Name: setClusterIPs, Type: at})
	rs.set(&Set{Name: setServiceCIDRs, Type: at, Flags: []knftables.SetFlag{knftables.IntervalFlag}})
	for _, p := range r.node.ServiceCIDRs {
		rs.element(setServiceCIDRs, "", p.String())
	}
	rs.add(chainClusterIPsChk, addrIn(true, setClusterIPs), gotoTo(chainReject))
	rs.add(chainClusterIPsChk, addrIn(true, setServiceCIDRs), dropIt())
}
