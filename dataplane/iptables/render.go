package iptables

import (
	"fmt"
	"net/netip"

	"github.com/switchyard-proxy/switchyard/dataplane"
	"github.com/switchyard-proxy/switchyard/dataplane/internal/sorted"
	"github.com/switchyard-proxy/switchyard/dataplane/serviceport"
)

// DefaultShardBits gives 64 shard chains: a packet walks at most 64 jumps
// in KUBE-SERVICES plus about n/64 rules in its shard.
const DefaultShardBits = 6

// RenderOptions tune rendering.
type RenderOptions struct {
	// ShardBits is the number of low destination-address bits that pick a
	// shard chain (1..8); 0 means DefaultShardBits.
	ShardBits int
}

// renderer holds the state of one Render call.
type renderer struct {
	fam  dataplane.Family
	opts RenderOptions
	// node is the NodeConfig read for the family.
	node serviceport.Node
	rs   *Ruleset
	// shards[i] holds the rules of shard i, in service order.
	shards map[int][]string
}

func newRenderer(fam dataplane.Family, opts RenderOptions) *renderer {
	if opts.ShardBits == 0 {
		opts.ShardBits = DefaultShardBits
	}
	return &renderer{fam: fam, opts: opts, rs: newRuleset(fam), shards: map[int][]string{}}
}

// Render turns a node's state into the ruleset of one family. It does no
// I/O and is deterministic: the same state gives byte-identical output.
// Bad input is skipped and recorded in Ruleset.Skips.
func Render(st *dataplane.State, fam dataplane.Family, opts RenderOptions) (*Ruleset, error) {
	return render(st, fam, opts, nil, true)
}

// render is Render reusing the unchanged services' rules from memo (when
// not nil) and checking every jump when validate is set.
func render(st *dataplane.State, fam dataplane.Family, opts RenderOptions, memo *Memo, validate bool) (*Ruleset, error) {
	if opts.ShardBits < 0 || opts.ShardBits > 8 {
		return nil, fmt.Errorf("shard bits %d out of range 1..8 (0: default)", opts.ShardBits)
	}
	r := newRenderer(fam, opts)
	r.readNode(st)
	r.fixedChains()
	if memo == nil {
		for _, n := range sorted.Keys(st.Services) {
			r.service(n, st.Services[n])
		}
	} else {
		memo.Reset(r.memoKey())
		for f := range memo.Fragments(st.Services, r.renderFragment) {
			r.replay(f)
		}
		memo.KeepOnly(st.Services) // services gone from st are forgotten
	}
	r.dispatch()
	if validate {
		if err := r.rs.Validate(); err != nil {
			return nil, fmt.Errorf("render %s: %w", fam, err)
		}
	}
	return r.rs, nil
}

func (r *renderer) readNode(st *dataplane.State) {
	// Node ports answer on every local address unless the control plane
	// says otherwise: kube-proxy's iptables default.
	r.node = serviceport.ReadNode(st.Config, dataplane.Family(r.fam), serviceport.NodePortsAll, func(svc, reason string) {
		r.rs.Skips = append(r.rs.Skips, dataplane.Skip{Service: svc, Reason: reason})
	})
}

// fixedChains writes the chains that exist whatever the services are and
// the jumps from the built-in chains.
func (r *renderer) fixedChains() {
	rs := r.rs
	// Written as iptables-save prints them (--or-mark, --xor-mark), so the
	// read-back comparison of a full sync matches.
	rs.add(tableNAT, chainMarkMasq, "-j MARK --set-xmark", masqMark+"/"+masqMark)
	// Before the RETURN below: packets from an endpoint to itself (src
	// ip, dst port, dst ip all in one member) get the masquerade mark, so
	// the reply comes back through the node.
	rs.HairpinSet = hairpinSet(r.fam)
	rs.add(tableNAT, chainPostrouting, comment("hairpin: endpoint reaching itself through a service"),
		"-m set --match-set", rs.HairpinSet, "src,dst,dst -j MARK --set-xmark", masqMark+"/"+masqMark)
	rs.add(tableNAT, chainPostrouting, "-m mark ! --mark", masqMark+"/"+masqMark, "-j RETURN")
	rs.add(tableNAT, chainPostrouting, "-j MARK --set-xmark", masqMark+"/0x0")
	rs.add(tableNAT, chainPostrouting, `-m comment --comment "kubernetes service traffic requiring SNAT"`,
		"-j MASQUERADE --random-fully")
	rs.chain(tableNAT, chainServices)
	rs.chain(tableNAT, chainNodePorts)
	if len(r.node.ClusterCIDRs) > 1 && !r.node.MasqueradeAll {
		for _, p := range r.node.ClusterCIDRs {
			rs.add(tableNAT, chainOffClusterMasq, "-s", p.String(), "-j RETURN")
		}
		rs.add(tableNAT, chainOffClusterMasq, "-j", chainMarkMasq)
	}
	rs.chain(tableFilter, chainServices)
	rs.chain(tableFilter, chainExternalServices)
	rs.chain(tableFilter, chainNodePorts)
	rs.chain(tableFilter, chainFirewall)
	rs.add(tableFilter, chainForward, "-m conntrack --ctstate INVALID -j DROP")
	rs.add(tableFilter, chainForward, `-m comment --comment "kubernetes forwarding rules"`,
		"-m mark --mark", masqMark+"/"+masqMark, "-j ACCEPT")
	rs.add(tableFilter, chainForward, `-m comment --comment "kubernetes forwarding conntrack rule"`,
		"-m conntrack --ctstate RELATED,ESTABLISHED -j ACCEPT")

	jump := func(table, chain, match, target, what string) {
		rule := match + jumpComment(what) + " -j " + target
		rs.Jumps = append(rs.Jumps, Jump{Table: table, Chain: chain, Rule: rule, Target: target})
	}
	const fresh = `-m conntrack --ctstate NEW `
	jump(tableNAT, "PREROUTING", "", chainServices, "kubernetes service portals")
	jump(tableNAT, "OUTPUT", "", chainServices, "kubernetes service portals")
	jump(tableNAT, "POSTROUTING", "", chainPostrouting, "kubernetes postrouting rules")
	jump(tableFilter, "INPUT", fresh, chainFirewall, "kubernetes load balancer firewall")
	jump(tableFilter, "INPUT", "", chainNodePorts, "kubernetes health check service ports")
	jump(tableFilter, "INPUT", fresh, chainExternalServices, "kubernetes externally-visible service portals")
	jump(tableFilter, "FORWARD", fresh, chainFirewall, "kubernetes load balancer firewall")
	jump(tableFilter, "FORWARD", "", chainForward, "kubernetes forwarding rules")
	jump(tableFilter, "FORWARD", fresh, chainServices, "kubernetes service portals")
	jump(tableFilter, "FORWARD", fresh, chainExternalServices, "kubernetes externally-visible service portals")
	jump(tableFilter, "OUTPUT", fresh, chainFirewall, "kubernetes load balancer firewall")
	jump(tableFilter, "OUTPUT", fresh, chainServices, "kubernetes service portals")
}

// toShard adds a destination rule for dst to its shard.
func (r *renderer) toShard(dst netip.Addr, rule string) {
	i := shardOf(dst, r.opts.ShardBits)
	r.shards[i] = append(r.shards[i], rule)
}

// dispatch writes KUBE-SERVICES: one jump per non-empty shard, then the
// jump to KUBE-NODEPORTS, which must stay last.
func (r *renderer) dispatch() {
	for i := 0; i < 1<<r.opts.ShardBits; i++ {
		rules := r.shards[i]
		if len(rules) == 0 {
			continue
		}
		name := shardChain(i)
		r.rs.chain(tableNAT, name).Rules = rules
		r.rs.add(tableNAT, chainServices, "-d", shardMatch(r.fam, i, r.opts.ShardBits), "-j", name)
	}
	r.nodePorts()
}

// nodePorts writes the jumps to KUBE-NODEPORTS, last in KUBE-SERVICES,
// for the local addresses node ports answer on (serviceport.NodePorts):
// every one but loopback, as kube-proxy does when it may not set
// route_localnet (a loopback node port would be DNATed and then dropped
// as a martian: a hang, where the kernel's own refusal is immediate);
// the node's primary address as it is; or the local addresses inside
// each CIDR, matched by CIDR and address type rather than by listing
// the node's interfaces as kube-proxy does, so an address added later is
// served without a resync and rendering reads no kernel state.
func (r *renderer) nodePorts() {
	const last = `-m comment --comment "kubernetes service nodeports; NOTE: this must be the last rule in this chain"`
	np := r.node.NodePorts
	if np.All {
		r.rs.add(tableNAT, chainServices, last, "-m addrtype --dst-type LOCAL ! -d", loopback(r.fam), "-j", chainNodePorts)
		return
	}
	for _, a := range np.Addrs {
		r.rs.add(tableNAT, chainServices, last, "-d", a.String(), "-j", chainNodePorts)
	}
	for _, p := range np.Prefixes {
		r.rs.add(tableNAT, chainServices, last, "-d", p.String(), "-m addrtype --dst-type LOCAL -j", chainNodePorts)
	}
}
