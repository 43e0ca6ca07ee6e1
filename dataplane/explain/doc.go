// Package explain answers what a node does with one packet: which
// endpoints it may reach and with what share, or whether it is rejected,
// dropped or left alone as not a service's, and why. It reads the node's
// view exactly as every kernel mode does (dataplane/serviceport), so the
// answer is the decision the modes program, not a second copy of it.
//
// The same Verdict type is what each mode's packet tracer returns after
// walking the rules its fake holds (iptablestest, the nftables and IPVS
// fakes, the userspace plan), and package scenario checks the explainer
// and every tracer against one table of cases.
//
// Invariants:
//   - Explain does no I/O and never fails: input it cannot use is part of
//     the answer (a Note naming what was skipped), never an error.
//   - A packet whose source is one of the node's addresses (NodeConfig
//     node_ips) or loopback comes from the node itself (the OUTPUT path);
//     any other source arrives from the network (PREROUTING), a pod on
//     the node included. Node ports answer on the node's addresses only.
//   - Shares of a forwarded packet add up to 1; every mode balances
//     evenly, so n endpoints have 1/n each.
//   - Masquerade is whether the connection is marked for masquerade, so
//     the endpoint sees the node's address instead of the client's; the
//     hairpin case (a pod reaching itself) is masqueraded by every mode
//     and not reported, and an endpoint on the node's own address is
//     delivered without passing postrouting, so it sees the client.
//   - Where kube-proxy's modes differ (short-circuit, reject or drop,
//     source ranges, service addresses; modes.go), the answer is the
//     mode's, each difference found by that mode's tracer.
package explain
