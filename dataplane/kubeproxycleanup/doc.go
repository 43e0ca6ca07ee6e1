// Package kubeproxycleanup removes what kube-proxy left on a node, so that
// switchyard-agent can take over from it (--cleanup-kube-proxy): kube-proxy's
// iptables chains and the jumps to them (iptables and ip6tables, legacy and
// nft back ends), its nftables tables (ip and ip6 "kube-proxy"), the IPVS
// virtual servers on its kube-ipvs0 link, that link, and its ipsets.
//
//	Run ─▶ survey (iptables-*-save, nft list tables, ip link, ipset list, ipvsadm -L -n)
//	    ─▶ evidence of kube-proxy? no ─▶ nothing touched
//	                               yes ─▶ its IPVS carries connections and KeepDraining? ─▶ nothing touched
//	                                      (dataplane.ErrDraining: try again)
//	                                      else iptables-*-restore --noflush (one per back end and family)
//	                                      nft delete table, ipvsadm -D, ip link del, ipset destroy
//
// # Why evidence first
//
// Switchyard's iptables mode uses kube-proxy's chain names (KUBE-SERVICES,
// KUBE-SVC-*, KUBE-SEP-*, …, see dataplane/iptables/names.go), so a chain
// name alone cannot say whose a chain is. kube-proxy (iptables and ipvs
// modes) keeps a KUBE-PROXY-CANARY chain in mangle, nat and filter, and its
// ipvs and older modes create chains Switchyard never does; its nftables
// mode owns the "kube-proxy" tables. Switchyard creates none of these. So:
//
//   - With such evidence on the node, kube-proxy ran here and every chain
//     with one of its names is removed, including ones that may hold
//     Switchyard rules (a node that ran both). That is safe because the
//     agent calls Run before its first sync, and the first sync of every
//     mode is a full one that reads the kernel back and rewrites its own
//     rules from its view (for iptables: chains and the jumps from the
//     built-in chains).
//   - Without evidence Run changes nothing. Removing the evidence is part of
//     the cleanup, so a restarted agent with the flag still set leaves its
//     own rules alone: static stability is kept.
//
// Invariants that keep Switchyard's future modes safe: they must never
// create KUBE-PROXY-CANARY or a chain in kubeProxyOnlyChains, nor an
// nftables table named "kube-proxy".
//
// # What is never touched
//
// kubelet's chains (KUBE-FIREWALL, KUBE-MARK-DROP, KUBE-KUBELET-CANARY,
// KUBE-IPTABLES-HINT), every chain or rule that is not kube-proxy's, other
// tables and sets. A kube-proxy chain that a foreign chain still jumps to
// (a CNI plugin using KUBE-MARK-MASQ, say) is flushed but kept, so the
// foreign rule stays valid. IPVS virtual servers are deleted only when
// their address is bound to kube-ipvs0 or their port is in one of
// kube-proxy's node-port sets (KUBE-NODE-PORT-TCP, …: its NodePort
// virtual servers on the node's addresses): a node's own LVS services
// (say, keepalived) survive.
//
// # Draining kube-proxy's IPVS connections
//
// kube-proxy's ipvs mode carries its connections in IPVS's own table;
// with net.ipv4.vs.conntrack=1 (kube-proxy sets it) their conntrack
// entries hold no NAT binding, so the rules that replace kube-proxy's
// (whose DNAT at prerouting runs before IPVS's LOCAL_IN hook) take new
// connections only, and the established ones keep reaching IPVS as long
// as the virtual servers and kube-ipvs0's addresses stay. Deleting them
// breaks those connections. With Config.KeepDraining, Run counts the
// connections of kube-proxy's virtual servers first and, while the
// caller wants to wait for them, leaves everything of kube-proxy's in
// place (the evidence too: a later Run must find it) and returns
// dataplane.ErrDraining. IPVS counts a closed TCP connection as inactive
// until its TIME_WAIT (2 min) ends, so a drain ends that long after the
// last connection closed.
//
// # The kernel seam
//
// Everything goes through a command.Runner (argv, stdin → stdout), the
// seam every mode uses, so command.ExecRunner works in production and
// in a throwaway namespace ("ip netns exec NS" prefix);
// kubeproxycleanuptest.Script is the scripted fake for unit tests. A
// missing tool or a kernel without the feature (no IPVS, no ipset) means
// kube-proxy cannot have left state there either: it is logged and skipped.
package kubeproxycleanup
