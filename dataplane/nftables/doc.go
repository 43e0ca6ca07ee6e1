// Package nftables is the nftables data plane: one table named
// "switchyard" in the ip and ip6 families, programmed through knftables,
// one transaction per sync.
//
// # Render, then apply
//
// Render(state, family) turns a dataplane.State into a Ruleset (chains
// with their rules, sets and maps with their elements) without any I/O,
// interpreting a ServiceView exactly as the iptables mode does (cluster
// and local endpoint sets, traffic policies, has_any_endpoints, ports by
// name). It is deterministic, skips bad input into Ruleset.Skips and never
// returns a rule or map element that references a missing chain or set
// (Ruleset.Validate).
//
// Dataplane.Apply renders each family and writes ONE knftables
// transaction per family:
//   - partial (the default): only the difference from the last successful
//     transaction: new sets, new and changed chains (flushed and rewritten
//     whole), map elements deleted and added, removed chains (all flushed,
//     then deleted) and removed sets. An endpoint change writes the
//     service's chain and the added or removed endpoint chain; a new
//     service adds its chains and map elements. No per-service list is
//     ever rewritten, and an identical state runs no transaction;
//   - full (ApplyOptions.Full, the first sync of the process, and the sync
//     after a failed one): every chain is declared, flushed and rewritten,
//     every static map and set flushed and refilled, and chains and sets
//     the kernel table holds but the render does not are deleted. After a
//     restart or a failure the leftovers are found by listing the table's
//     chain and set names; a periodic resync uses what it applied.
//     Affinity sets are declared but never flushed: a resync or a restart
//     keeps clients on their endpoints. The first full sync of a process
//     also deletes and recreates the base chains, so a changed hook or
//     priority is applied instead of failing the add.
//
// A failed transaction changes nothing in the kernel (nft applies it
// atomically) and makes the next sync full. knftables.Fake is the
// in-memory stand-in in unit tests; NewExecInterface adapts a Runner (the
// only seam to the kernel, bound to one network namespace) to
// knftables.Interface, because knftables.New always runs nft in the
// calling process's namespace.
//
// # Table
//
//	nat-prerouting, nat-output ─▶ services: ip daddr . meta l4proto . th dport vmap @service-ips
//	                                        node address: meta l4proto . th dport vmap @service-nodeports
//	@service-ips / @service-nodeports ─▶ svc-* (cluster endpoints) | local-* (node-local) | ext-* (external)
//	svc-*, local-*: affinity (ip saddr @affinity-* goto ep-*), then numgen random mod k 0 goto ep-* (cascade)
//	ep-*: ip saddr <ep> jump mark-for-masquerade; update @affinity-*; dnat to <ep>
//	nat-postrouting ─▶ masquerading (mark 0x4000 → masquerade fully-random)
//	filter input/forward/output ─▶ service-endpoints-check / nodeport-endpoints-check: vmap @no-endpoint-* (reject | drop)
//	filter pre-DNAT ─▶ firewall-check: vmap @firewall-ips ─▶ fw-* (loadBalancerSourceRanges)
//
// Per-service names are kube-proxy's form: a prefix, 8 base32 characters
// of a SHA-256 of the identity, and "namespace/name/proto/port"
// ("__addr/port" for endpoints). Only per-service objects contain "/".
//
// # Why a cascade of numgen rules
//
// kube-proxy's "numgen random mod N vmap { … }" creates one anonymous set
// per service; loading 10,000 of them took 214 s on this kernel
// (shared/notes/kernel-facts.md). Rule i of the cascade matches with
// probability 1/(n-i) (each endpoint gets 1/n, as iptables' statistic
// rules), no set is created, and a full load of 10,000 services × 5
// endpoints takes seconds. A named map per service was measured too: its
// full load was twice as slow as the cascade and every partial
// transaction lists every set.
//
// # What a partial sync costs (nft 1.0.6)
//
// The kernel commit of a one-service change takes 2–3 ms at 10,000
// services (strace of the commit sendmsg), independent of the table's
// size. The nft binary, however, dumps the name of every chain of the
// family before it applies any "add rule" or "add element" (its cache;
// measured: 426 KB for 6,000 chains, 0.4–0.6 s for 60,000 chains), so a
// transaction's wall time grows with the number of chains, not with the
// change. See README.md for the measurements.
//
// # Partial syncs over netlink
//
// With Config.PartialNetlink set, a partial transaction is sent over
// netlink with github.com/google/nftables instead of nft, skipping nft's
// cache. The knftables transaction stays the plan and the source of
// truth: planPartial records each operation it writes (opLog), and
// translate (netlink.go) maps the recorded objects to netlink messages:
// non-base chain add/flush/delete, rules of the closed grammar of
// parseRule (netlink_rule.go: address matches, set lookups, the numgen
// cascade, meta l4proto, goto/jump/drop/return, affinity update, dnat)
// and verdict-map elements. The expressions are the ones nft 1.0.6
// generates for the same text; e2e/dataplane/nftables compares the
// kernel's dump after a netlink partial sync with a fresh nft load of the
// same state. Any other operation (sets, set elements, base chains,
// fib, reject, prefixes, …) makes the whole transaction run through nft
// (SyncStats.NetlinkFallbacks). Full syncs always run nft.
//
// # Invariants
//   - Only the "switchyard" tables are touched; Cleanup deletes them whole.
//   - Everything runs through the Runner (and, if set, the netlink
//     dialer) given in Config, in the node's namespace; nothing here
//     chooses a namespace.
//   - Removing a chain that a map element pointed to in the same
//     transaction needs kernel ≥ 6.2 (older kernels release the reference
//     asynchronously; kube-proxy defers such deletes).
package nftables
