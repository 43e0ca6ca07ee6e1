// Package iptables is the iptables data plane: it programs a node's nat
// and filter tables in a leaner form of kube-proxy's shape (same chain
// names, sharded dispatch, no per-endpoint chains, hairpin by ipset) and
// lets the kernel forward.
//
// # Render, then apply
//
// Render(state, family, options) turns a dataplane.State into a Ruleset
// for one family (IPv4 → iptables, IPv6 → ip6tables, same code) without
// any I/O. It is deterministic: services are walked in name order,
// endpoints in address order, chains are printed sorted. Bad input (odd
// names, bad addresses, duplicate endpoints or ports) is skipped and listed
// in Ruleset.Skips; Render never returns a ruleset with a jump to a missing
// chain (Ruleset.Validate).
//
// Dataplane.Apply renders, diffs against the rules it applied last and
// writes only the difference through a command.Runner (iptables-restore
// -w --noflush; a full sync that must write most chains on nft replaces
// whole tables instead, see below). The Runner is the only seam to the
// kernel; it is bound to one network namespace. iptablestest.Fake is its
// in-memory stand-in.
//
// What is not specific to this mode lives in package xtables, which the
// IPVS mode shares: the Family and Flavour types and flavour detection,
// iptables-save parsing (xtables.ParseSave), the canonical rule
// comparison (xtables.SameRules) and the cleanup plan of a read-back
// (xtables.CleanupPayload). This package keeps what only it does:
// rendering, planning, the incremental sync, the rewrite, the drift
// checks and the hairpin sets.
//
// # Chains
//
//	PREROUTING, OUTPUT ─▶ KUBE-SERVICES ─┬─▶ KUBE-SHARD-00 … KUBE-SHARD-3F ─▶ KUBE-SVC-*, KUBE-SVL-*, KUBE-EXT-*, KUBE-FW-*
//	                                     └─▶ KUBE-NODEPORTS (last; on the node port addresses, by default every local one but loopback) ─▶ KUBE-EXT-*
//	KUBE-SVC-* (cluster endpoints), KUBE-SVL-* (local endpoints) ─┬─▶ DNAT (random choice, no affinity)
//	                                                               └─▶ KUBE-SEP-* (ClientIP affinity: -m recent, DNAT)
//	POSTROUTING ─▶ KUBE-POSTROUTING: mark 0x4000 if (src, dst port, dst) ∈ KUBE-SWYD-HAIRPIN[6],
//	               then MASQUERADE packets marked 0x4000 (here or by KUBE-MARK-MASQ)
//	filter: KUBE-SERVICES, KUBE-EXTERNAL-SERVICES (REJECT / DROP when no endpoints),
//	        KUBE-PROXY-FIREWALL (loadBalancerSourceRanges), KUBE-NODEPORTS (health checks), KUBE-FORWARD
//
// Per-service chain names are kube-proxy's own: a prefix plus 16 base32
// characters of the SHA-256 of "namespace/name:port" and the protocol in
// lower case (then the endpoint's "ip:port" for KUBE-SEP), so they are
// stable across restarts, at most 26 characters, and the very chains
// kube-proxy's iptables mode writes for the same service port. A hand-over
// between the two proxies (either way) therefore rewrites each Service's
// chains in place in one iptables-restore: neither proxy meets chains of
// the other's that it would have to delete while a rule still jumps there
// (kube-proxy deletes the chains with its prefixes it does not want, and
// such a delete fails its whole restore).
//
// The jumps from built-in chains are not kube-proxy's: their comments
// start "switchyard: " (xtables.OwnJumpPrefix; names.go, jumpComment,
// says why). Each proxy keeps its own jumps to the shared chains while
// both are on a node, so either can go without taking the other's path
// with it, and kube-proxy's nftables mode, whose start deletes the
// iptables mode's jumps by their exact text, cannot cut this mode's.
//
// This package renders only that structure. The benchmark that compares
// it with kube-proxy's exact one (one flat KUBE-SERVICES, a KUBE-SEP
// chain per endpoint with its own hairpin rule, no ipset, top-level
// chains rewritten at every sync) has its own renderer of kube-proxy's
// shape, in e2e/dataplane/iptables (kubeproxyshape_test.go).
//
// # Why shards
//
// kube-proxy puts one rule per service port address in KUBE-SERVICES, so a
// packet walks O(n) rules and every service change rewrites that chain,
// which dominates a one-service update at scale (see
// shared/notes/kernel-facts.md). Here KUBE-SERVICES holds at most 64 jumps,
// one per non-empty shard, matched by the low 6 bits of the destination
// address (-d 0.0.0.k/0.0.0.63; ::k/::3f for IPv6: a mask, not a CIDR), and
// each shard holds the rules of the addresses that fall in it. A packet
// walks ≤ 64 + n/64 rules (≈ 2√n at n = 4096). An endpoint change rewrites
// only the service's KUBE-SVC chain (and, with affinity, the added or
// removed KUBE-SEP chains); adding or removing a service rewrites one shard
// of ~n/64 rules, and KUBE-SERVICES only when a shard becomes empty or
// non-empty. That is what wins on iptables-nft, whose restores touch only
// the chains they name; on legacy see the next section.
//
// # Why no KUBE-SEP chains
//
// On iptables-legacy every restore, however small, reads the whole nat
// table from the kernel as one blob and writes it back whole, so a sync
// costs O(entries in the table) (shared/notes/kernel-facts.md). Sharding
// does not shrink the table; only fewer entries do. In the blob a chain
// costs 2 entries (its head and its policy/return) and a rule 1, each
// -m comment a 256-byte match. kube-proxy's shape gives a service port
// with 5 endpoints 6 chains (KUBE-SVC + 5 KUBE-SEP) and 17 rules ≈ 29
// entries, every rule with a comment. The per-endpoint KUBE-SEP chain
// exists for two things: its hairpin rule (-s endpoint -j KUBE-MARK-MASQ)
// and a name for -m recent.
//   - Hairpin traffic is marked by ONE rule per family in KUBE-POSTROUTING
//     matching a hash:ip,port,ip set of every endpoint ("ip,proto:port,ip"
//     on src,dst,dst: an endpoint talking to itself after DNAT), as
//     kube-proxy's IPVS mode does with KUBE-LOOP-BACK. The set lives in
//     the kernel's ipset hash, outside the table blob; the existing mark
//     and MASQUERADE path does the rest.
//   - Without ClientIP affinity, KUBE-SVC/KUBE-SVL DNAT directly
//     (-p proto [-m statistic …] -j DNAT). Affinity services keep KUBE-SEP
//     chains (DNAT plus -m recent --set), since -m recent needs a list
//     name per endpoint.
//
// A port with 5 endpoints now costs 1 chain and 7 rules (shard rule,
// masquerade check, 5 DNATs) ≈ 9 entries instead of ≈ 29. Measured
// (legacy, 5 endpoints per service, CPU of iptables-restore and ipset per
// sync): one endpoint moving costs 162 ms at 1k services and 707 ms at 5k,
// against 347 ms and 2126 ms for kube-proxy's shape (before this change:
// 400 and 1712 ms, a tie). The numbers and how to rerun them are in
// README.md.
//
// # Commit order
//
// Each table block of a restore is its own kernel transaction (both
// flavours commit at every COMMIT), so a sync is a sequence of commits
// and every state between them carries traffic. A service port with
// endpoints is served by its DNAT in nat; one without by its REJECT (or
// DROP) in filter. A REJECT matches the service address, which a packet
// nat has DNATed no longer carries, so a REJECT next to a DNAT changes
// nothing, while a port with neither sends new connections to the
// address itself: they time out (RELIABILITY.md, finding 1: filter used
// to commit first, and a service gaining its first endpoints lost its
// REJECT ~15–20 ms before its DNAT arrived).
//
// Invariant: no commit of any sync leaves a service port that had a
// DNAT or a REJECT with neither. Every sync (partial, full, batched, the
// whole-table rewrite) commits in three steps (plan.go, phases):
//
//  1. filter, transitional: each filter chain that gains rules holds its
//     old rules and its new ones (REJECTs only added);
//  2. nat, in as many batches as it takes (DNATs added and removed);
//  3. filter, final: the REJECTs that went away removed.
//
// A port that loses its endpoints has its REJECT from step 1 on and its
// DNAT until step 2; one that gains them keeps its REJECT until step 3
// and has its DNAT from step 2 on. Steps with nothing to write are
// skipped: a sync where ports only lose endpoints is filter then nat, one
// where they only gain is nat then filter, a mixed one writes filter
// twice (two restores, since one restore names each table once). The
// whole-table rewrite commits steps 1 and 2 as its two tables and step 3
// with --noflush after it. Owned filter chains the render no longer has
// are deleted in step 3 (the rewrite drops them in step 1); service
// rules live only in the fixed filter chains, which every render has.
//
// # Applying
//
//   - The first Apply and every Apply with Full read the tables back
//     (iptables-save), rewrite every owned chain whose rules differ from
//     the read-back (compared in a canonical form, since iptables-save
//     reorders matches and respells values: xtables.SameRules), delete owned chains
//     the state no longer has and insert missing jumps from built-in
//     chains. A restarted agent thus reconciles without rewriting what is
//     already right, and a periodic resync repairs drift cheaply.
//     Other Applies write only chains whose rules changed and delete chains
//     that went away; applying the same state twice runs no command.
//   - A partial sync looks only at what changed (incremental.go): the
//     render memo (package fragments, shared with nftables) finds the
//     services whose view differs — only among the names the caller's
//     hint (ApplyOptions.Changed) gives, when it gives one — and only
//     they are rendered; their own chains are diffed against their old
//     fragment, the shared chains they write to (a shard, KUBE-NODEPORTS,
//     the filter chains) rebuilt from their contributors, KUBE-SERVICES
//     from the shards left, and the hairpin set and the conntrack cleanup
//     change by their members and ports. A change of the node's settings
//     renders every service instead.
//   - Chains are written leaves first. On iptables-nft, whose --noflush
//     restore is quadratic in the chains it declares, a full sync is split
//     into restores of at most MaxChainsPerRestore chains (default 5000);
//     every batch only references chains that exist, so each intermediate
//     state forwards correctly. On legacy a sync is one restore (two when
//     filter commits twice, see "Commit order"), each table atomic.
//   - Whole-table rewrite (rewrite.go): on iptables-nft every --noflush
//     restore that adds to a big table costs ~130 ms at 5k services, and
//     declaring chains is quadratic, so a first sync into an empty table
//     took 35–46 s at 5k in batches. When a full sync must write more than
//     Config.RewriteTablesAbove chains (default 1000, nft only) and at
//     least a quarter of the rendered ones, it instead replaces nat and
//     filter with ONE restore without --noflush,
//     rebuilt from the read-back it has just taken: built-in chains keep
//     their policy, every foreign chain and rule is re-emitted verbatim and
//     in order, missing jumps go on top of their built-in chain, rules
//     jumping to owned chains that no longer exist are dropped, and our
//     chains come from the render. The result is the same table the
//     batched path produces (tested against it), written atomically per
//     table, filter first in its transitional form, and the final filter
//     chains follow in one --noflush restore (see "Commit order"). The
//     rewrite is skipped when the read-back is not reproducible
//     (iptables-nft-save reports an incompatible table, or prints a line
//     we cannot parse). A failed rewrite falls back to the batched path,
//     planned from a fresh read-back (each table commits on its own, so
//     an earlier one may already be replaced). Partial syncs never
//     rewrite tables.
//   - The rewrite's race: iptables-save takes no lock, iptables-nft ignores
//     -w (it takes no xtables lock; each table COMMIT is one nft transaction)
//     and iptables-legacy holds the lock only while restoring. A rule that
//     another writer adds to nat or filter after our read-back and before
//     our restore commits is therefore lost: the window is the parse and
//     payload build (milliseconds) plus the restore itself (~1 s at 1k
//     services, ~5 s at 5k on nft). Rules already there are never lost,
//     and nothing is written to tables we do not render (mangle, raw, nft
//     tables of other software). The window exists only on syncs that
//     rewrite most of our chains (the first after start, after Cleanup or
//     a failed Apply); writers such as kubelet, CNI plugins and Docker
//     re-ensure their rules periodically. Set RewriteTablesAbove < 0 to
//     trade the first-sync time for never flushing.
//   - The hairpin sets (ipset.go) follow the rules: members of new
//     endpoints are added (and the set created) with one `ipset restore
//     -exist` before the iptables restore that DNATs to them, members of
//     gone endpoints deleted after the restore that stops, so no state in
//     between DNATs an endpoint to itself unmasqueraded and no restore
//     matches a missing set. A partial sync diffs against the members it
//     applied last; a full sync reads the set back (`ipset save NAME`) and
//     repairs drift the same way, writing nothing when it is right. A set
//     of our name but another type is reported, not replaced (a set in
//     use cannot be destroyed or retyped; Cleanup removes it).
//   - A failed Apply forgets what was applied (the ruleset and its index
//     a partial sync updates in place), so the next one is full.
//   - The flavour (legacy or nft) is detected in the target namespace as
//     kube-proxy's iptables-wrapper does (xtables.DetectFlavour).
//   - Cleanup (teardown.go; what is ours in cleanup.go, planned by
//     xtables.CleanupPayload) needs no prior Apply:
//     it reads both back ends (legacy and nft) of every family, removes
//     every owned chain, the jumps to them from built-in chains, every
//     jump to the chains only this mode names (KUBE-SHARD-*,
//     KUBE-MASQ-OFFCLUSTER) and every rule matching the hairpin sets, then
//     destroys those sets (the kernel refuses to destroy a set a rule
//     still matches), and nothing else. A chain of ours that a foreign
//     chain jumps to is emptied but kept. Where kube-proxy's canary chain
//     is in a back end, the chains under the names kube-proxy shares with
//     this mode, and kube-proxy's jumps to them, are left: they may be
//     kube-proxy's (its full sync deletes its unused ones;
//     --cleanup-kube-proxy removes them all); this mode's own jumps go.
//   - TCP services without endpoints are rejected with a TCP reset rather
//     than ICMP port-unreachable: an ICMP error to a connect() on the node
//     itself is only acted on at the SYN retransmit (1–2 s, measured).
//
// # Drift checks
//
// CheckDrift (drift.go, dataplane.DriftChecker) tells whether the
// kernel still holds what the last successful Apply left. Its cheap half
// is a mark read without reading rules (drift_mark.go): on iptables-nft
// the nf_tables ruleset generation (Config.Generation, package nftgen),
// on iptables-legacy the x_tables info of nat and filter (entry count,
// blob size, chain offsets: Config.LegacyInfo, package xtinfo). Equal to
// the baseline, nothing changed. Apply moves the baseline: on nft only
// when the generation moved by exactly the table blocks its restores
// committed; on legacy, which counts nothing, to the mark read right
// after its last restore (a foreign change in that instant is missed
// until the periodic full resync, as is a legacy rule replaced by one of
// the same encoded size). Otherwise, and with no mark configured, the
// check reads back with iptables-save per family (and ipset save) and
// compares exactly what a full sync repairs: owned chains (missing,
// extra, rules different in canonical form), jumps from built-in chains
// (present by target) and the hairpin set's members; never a foreign
// chain or rule. A read-back whose output (counters and comments aside)
// hashes as the last clean one since the last Apply is not parsed. The
// hairpin set is neither nf_tables nor x_tables: a change to it alone is
// found by the next read-back or by the full resync. A family found
// drifted has its next Apply made full, which reads the tables back and
// rewrites what differs. Costs, measured, are in README.md.
package iptables
