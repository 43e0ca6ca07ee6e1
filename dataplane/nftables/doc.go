// Package nftables is the nftables data plane: one table named
// "switchyard" in the ip and ip6 families, programmed through knftables,
// one transaction per sync.
//
// # Render, then apply
//
// Render(state, family) turns a dataplane.State into a Ruleset (chains
// with their rules, sets and maps with their elements) without any I/O,
// reading a ServiceView through package serviceport exactly as the other
// modes do, and programming each port as serviceport decided it (which
// endpoints internal and external traffic use, reject or drop without
// one). It is deterministic, skips bad input into Ruleset.Skips and never
// returns a rule or map element that references a missing chain or set
// (Ruleset.Validate).
//
// Dataplane.Apply writes ONE knftables transaction per family:
//   - partial (the default): only the difference from the last successful
//     transaction: new sets, new and changed chains (flushed and rewritten
//     whole), map elements deleted and added, removed chains (all flushed,
//     then deleted) and removed sets. An endpoint change of a service
//     without affinity is map elements only (its endpoint map and the
//     hairpin set); a new service adds its chain, its endpoint map and
//     its map elements. No per-service list is ever rewritten, and an
//     identical state runs no transaction. Only the services whose view
//     changed are rendered and compared (incremental.go): the memo keeps
//     every service's fragment of the applied ruleset, which is updated
//     in place after the commit;
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
//	                                        node port address: meta l4proto . th dport vmap @service-nodeports
//	@service-ips / @service-nodeports ─▶ svc-* (cluster endpoints) | local-* (node-local) | ext-* (external)
//	svc-*, local-*: meta l4proto P dnat ip addr . port to numgen random mod 65536 offset <block> map @endpoints-P-<shard>
//	  round-robin: numgen inc mod <n> offset <block> map @endpoints-P-<shard> (endpoint i at block+i)
//	  maglev, source-hash: jhash ip saddr [. P sport] mod <size> seed <seed> offset <block> map @maglev-P-<shard> (slot i at block+i)
//	  with ClientIP affinity instead: ip saddr @affinity-* goto ep-*, then numgen random mod k 0 goto ep-* (cascade)
//	  ep-* (affinity only): update @affinity-* { ip saddr }; dnat to <ep>
//	nat-postrouting ─▶ masquerading: ip saddr . ip daddr @hairpin-endpoints → mark 0x4000; mark 0x4000 → masquerade fully-random
//	filter input/forward/output ─▶ service-endpoints-check / nodeport-endpoints-check: vmap @no-endpoint-* (reject | drop)
//	filter forward/output ─▶ cluster-ips-check: ip daddr @cluster-ips → reject (unserved port); ip daddr @service-cidrs → drop
//	filter pre-DNAT ─▶ firewall-check: vmap @firewall-ips ─▶ fw-* (loadBalancerSourceRanges)
//	filter forward (priority 10, with NodeConfig.flowtable_interfaces) ─▶ flowtable-forward:
//	  meta l4proto tcp ct state established ct status dnat flow add @fastpath (flowtable.go)
//
// Per-service names are kube-proxy's form: a prefix, 8 base32 characters
// of a SHA-256 of the identity, and "namespace/name/proto/port"
// ("__addr/port" for endpoints). Only per-service objects contain "/".
//
// # Why endpoint maps, and why the hairpin set
//
// The kernel validates, at commit, every chain reachable through the
// verdict maps whenever the transaction adds a rule (any rule: dnat,
// lookup and immediate expressions all have validate hooks) or a jump or
// goto map element. That walk cost ~60 ms at 5,000 services and grew
// with the table, so an endpoint change that rewrote the service's
// chain or added an endpoint chain cost O(services) in the kernel. An
// endpoint map holds data, not verdicts: each balancing chain owns a
// block of 65,536 keys (slots.go), each endpoint an equal range of it
// (shares exact to 1/65,536), and the rule "dnat ip addr . port to
// numgen random mod 65536 offset <block> map @endpoints-<proto>-<shard>"
// never changes with the endpoints, so adding, removing or moving them is
// element operations that trigger no validation (0.7–4.7 ms of commit CPU at
// 1k–10k services, e2e/dataplane/nftables BenchmarkSync). kube-proxy's
// per-endpoint chain existed to mark hairpin traffic (a pod reaching
// itself through its Service); here postrouting matches
// "ip saddr . ip daddr @hairpin-endpoints" (one "ep . ep" pair per
// endpoint address), so the endpoint chain is not needed. Affinity
// services keep per-endpoint chains: each records its clients in its own
// timeout set. The maps are shared, 32 per protocol (endpointMap says
// why not one per service or one for all). Their key is "typeof numgen
// random mod 65536" and the data names the protocol ("tcp dport"): with
// "th dport" nft 1.0.6 refuses the rule once it reads the map back from
// the kernel.
// No anonymous sets: "numgen random mod N vmap { … }" per service took
// 214 s to load at 10,000 services (shared/notes/kernel-facts.md).
//
// # What a partial sync costs
//
// Over netlink (the agent's default) a one-endpoint change is a few
// element messages, merged per set (the kernel finds a set by walking
// the table's list of sets). The nft binary (the fallback) loads a cache
// of every chain and, for interval maps, of their elements before it
// applies anything, so a transaction through nft costs O(table): 0.66 s
// at 10,000 services. A full sync always runs nft (5.6 s at 10,000); see
// README.md for the measurements.
//
// # Partial syncs over netlink
//
// With Config.PartialNetlink set, a partial transaction is sent over
// netlink with github.com/google/nftables instead of nft, skipping nft's
// cache. The knftables transaction stays the plan and the source of
// truth: both partial planners find a difference (delta.go) and write
// it with one emitter, recording each operation (opLog), and translate
// (netlink.go, netlink_map.go) maps the recorded objects to netlink
// messages: non-base chain add/flush/delete, rules with a typed form
// (rule.go: address matches, set lookups, the numgen cascade, meta
// l4proto, goto/jump/drop/return, affinity update, dnat to an address or
// through an endpoint map; the form writes both the nft text and the
// expressions, netlink_rule.go, so no text is read back), verdict-map
// elements, endpoint ranges, hairpin pairs and affinity sets (created
// and deleted). The expressions, set attributes and element bytes are the
// ones nft 1.0.6 generates for the same text; e2e/dataplane/nftables
// compares the kernel's dump after a netlink partial sync with a fresh
// nft load of the same state. The endpoint maps are fixed objects made
// by full syncs: google/nftables cannot write the "typeof" note nft
// keeps in their user data. Any other operation (base chains, fib,
// reject, prefixes such as loadBalancerSourceRanges, …) makes the whole
// transaction run through nft (dataplane.SyncStats.NetlinkFallbacks). Full syncs
// always run nft.
//
// # Drift checks
//
// CheckDrift (drift.go, dataplane.DriftChecker) tells whether the
// kernel still holds what the last successful Apply left. The cheap
// half is the nf_tables ruleset generation of the node's namespace
// (package nftgen), which every commit by anyone bumps by one: equal to
// the recorded baseline, nothing changed, after one netlink exchange
// (30–130 µs measured, whatever the table's size). Apply reads it
// before and after its transactions and moves the baseline only when it
// moved by exactly the transactions it committed (one per nft -f, one
// per netlink batch) from the baseline,
// so a foreign commit before, between or after ours is never taken for
// ours. Otherwise the tables are read back over netlink (netlink_read.go,
// netlink_dump.go: chains, one dump of every rule, the elements of each
// set) and compared with the applied Ruleset: a missing table, a
// missing or extra chain (or a base chain on another hook or priority),
// a chain whose rules differ (per-service rules expression by
// expression, as their form builds them; fixed rules by count and by the
// sets and chains they name: drift_rules.go), a missing, extra or
// retyped set, and each element missing or extra (drift_elements.go:
// keys and data as the kernel holds them; endpoint ranges by their
// start, other interval sets as merged intervals, since nft's layout of
// intervals varies; affinity sets not at all). Nothing outside the
// mode's tables is read. A read-back that finds nothing records the
// generation it read before reading as the new baseline. A family found
// drifted is relearned: its next Apply is full whatever the caller asks,
// lists the kernel table first (so chains and sets someone deleted are
// not flushed, and ones someone added are deleted) and resets the base
// chains, as after a restart. Costs, measured, are in README.md.
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
