// Package leftovers removes what Switchyard's dataplane modes left in the
// node's kernel, for every mode but the one in use: after an agent starts
// (or a NodeConfig switches it) in another mode, and for `switchyard-agent
// --cleanup` (every mode).
//
//	Clean(keep) ─▶ for iptables, nftables, ipvs (≠ keep): Build(mode) ─▶ Dataplane.Cleanup
//	                  Build fails with dataplane.ErrUnavailable ─▶ skipped (no IPVS: nothing of it can exist)
//
// What each mode leaves, and removes in its own Cleanup (each only its
// own, never foreign rules):
//   - iptables: the KUBE-* chains of dataplane/iptables (nat and filter,
//     iptables and ip6tables, legacy and nft back ends), the jumps to them
//     from built-in chains, and the KUBE-SWYD-HAIRPIN[6] ipsets. These are
//     kube-proxy's names too: where kube-proxy's canary chain is found,
//     only the chains kube-proxy never names go (--cleanup-kube-proxy,
//     dataplane/kubeproxycleanup, removes the rest).
//   - nftables: the "switchyard" tables of families ip and ip6.
//   - ipvs: the virtual servers on kube-ipvs0's addresses and on its
//     registered node ports, kube-ipvs0, the SWYD-IPVS-* chains and the
//     SWYD-IPVS[6]-* ipsets (kube-ipvs0 and the virtual servers stay
//     where kube-proxy's canary is found).
//   - userspace: nothing outlives the process. It programs no netfilter
//     rule (it prints the redirects it would need, never installs them);
//     its sockets close with the process, or with its Cleanup when the
//     agent switches away from it at runtime.
//   - dry-run: nothing. With dry-run in use, Clean touches nothing either:
//     the mode promises not to program the kernel.
//
// A mode whose kernel carries connections of its own (dataplane.Drainer:
// ipvs) is kept while they last, at most Config.MaxDrain (Clean returns
// dataplane.ErrDraining meanwhile, and Retry checks only such modes
// again, not the ones Clean removed); Config.AtOnce (the uninstall)
// removes it at once and counts what it cut (Outcome.Cut).
//
// Invariants: Clean goes on past a failing mode and returns every failure
// joined, each naming its mode; it never cleans the mode it keeps; it
// uses the agent's own dataplane instances (Build), so cleaning a mode
// also resets that instance and a later switch to it starts with a full
// sync.
package leftovers
