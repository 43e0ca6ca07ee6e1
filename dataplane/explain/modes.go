package explain

// traits are where kube-proxy's modes (and so Switchyard's) treat the same
// decision differently. Each was found by a mode's packet tracer walking
// the rules the mode programs, against the shared scenario table.
type traits struct {
	// shortCircuit: under an external Local policy, traffic from the
	// node and its pods to the external addresses goes to every
	// endpoint (iptables, nftables). IPVS cannot choose real servers by
	// source and the userspace proxy has one backend set per listener:
	// they apply the policy to every client.
	shortCircuit bool
	// refusesInsteadOfDrop: no endpoint means no listener, so the
	// kernel refuses a connection the other modes drop (userspace).
	refusesInsteadOfDrop bool
	// sourceRanges: loadBalancerSourceRanges are enforced (all but
	// userspace, whose listener accepts every client).
	sourceRanges bool
	// sourceRangesFromNode: also for the node's own connections. IPVS
	// takes those at LOCAL_OUT, before the filter INPUT rule that checks
	// the ranges (kube-proxy adds -m ipvs --vaddr rules in OUTPUT for it).
	sourceRangesFromNode bool
	// externalRefusedFromNode: the node's own connection to an external
	// or load-balancer IP without endpoints is refused. kube-proxy's
	// iptables mode checks those addresses in INPUT and FORWARD only, so
	// the node's own packet leaves by its routes.
	externalRefusedFromNode bool
	// serviceAddrsLocal: every service address is a local address
	// (kube-ipvs0), and new connections to a port none of them serves
	// are rejected (kube-proxy's KUBE-IPVS-FILTER).
	serviceAddrsLocal bool
	// guardsServiceRanges: a cluster IP's unserved ports are rejected
	// and the rest of the Service ranges dropped (nftables, as
	// kube-proxy's nftables mode).
	guardsServiceRanges bool
	// sctp: the mode forwards SCTP (Go has no SCTP sockets: userspace
	// cannot).
	sctp bool
	// proxies: the mode connects to the endpoint itself, so the client's
	// address never reaches it (userspace).
	proxies bool
	// drainMeetsNodeFirst: a virtual server stays while a removed
	// endpoint's connections drain (weight 0), and the node's own
	// packets meet it at LOCAL_OUT before the filter rule that drops
	// them: IPVS refuses them until the drain ends (IPVS; found by the
	// guest's Explain-vs-traffic test). The view holds no drain state, so
	// it is a note, not a verdict.
	drainMeetsNodeFirst bool
	// nodePortsPrimary: an empty node_port_addresses means the node's
	// primary address (nftables), not every local one.
	nodePortsPrimary bool
	// loopbackNodePortsRefused: a node port without endpoints for
	// external traffic is refused on loopback too. kube-proxy's iptables
	// mode never DNATs loopback node ports (no route_localnet) but its
	// filter rule matches every local address (-m addrtype --dst-type
	// LOCAL); the other modes match only the node port addresses.
	loopbackNodePortsRefused bool
	// nodePortsEverywhereWithoutNodeIPs: on a node whose NodeConfig has
	// no node IP of either family, node ports are served on every local
	// address, loopback included (userspace: its listeners bind the
	// unspecified address).
	nodePortsEverywhereWithoutNodeIPs bool
	// maglevTables: hashed algorithms (maglev, source-hash) pick
	// through the control plane's table, the same on every node
	// (nftables, userspace); in nftables not with ClientIP affinity,
	// whose per-endpoint affinity chains make the first pick random
	// (userspace's affinity remembers the table's pick).
	maglevTables bool
	// affinityPicksAtRandom: with ClientIP affinity a new client's first
	// pick is random whatever the algorithm (nftables).
	affinityPicksAtRandom bool
	// roundRobin: the mode can take endpoints in turn (nftables,
	// userspace, ipvs rr).
	roundRobin bool
	// kernelHash: hashed algorithms become the kernel's own schedulers
	// (ipvs mh and sh): every node hashes alike, with the kernel's table.
	kernelHash bool
	// inTurn: the mode's own choice is round robin, not random
	// (userspace), also for algorithms it does not program.
	inTurn bool
}

var modeTraits = map[string]traits{
	ModeIPTables: {shortCircuit: true, sourceRanges: true, sourceRangesFromNode: true, sctp: true, loopbackNodePortsRefused: true},
	ModeNFTables: {shortCircuit: true, sourceRanges: true, sourceRangesFromNode: true, externalRefusedFromNode: true,
		guardsServiceRanges: true, sctp: true, nodePortsPrimary: true, maglevTables: true, affinityPicksAtRandom: true, roundRobin: true},
	ModeIPVS: {sourceRanges: true, externalRefusedFromNode: true, serviceAddrsLocal: true, sctp: true, drainMeetsNodeFirst: true,
		roundRobin: true, kernelHash: true},
	ModeUserspace: {refusesInsteadOfDrop: true, externalRefusedFromNode: true, proxies: true, nodePortsEverywhereWithoutNodeIPs: true,
		maglevTables: true, roundRobin: true, inTurn: true},
}

// traitsOf is a mode's traits; an unknown mode is read as iptables.
func traitsOf(mode string) traits {
	if t, ok := modeTraits[mode]; ok {
		return t
	}
	return modeTraits[ModeIPTables]
}
