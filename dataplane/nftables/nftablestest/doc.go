// Package nftablestest traces a packet through the rules a knftables.Fake
// holds, as the kernel would walk them, and answers with the
// explain.Verdict the nftables mode's rules decide: forward (to which
// endpoints, with what share, masqueraded or not, with which affinity
// timeout), reject, drop, or pass. Package scenario compares that answer
// with the explainer's; goldens say what the mode writes, the tracer
// says what it does.
//
// The model, after kube-proxy's nftablesTracer (pkg/proxy/nftables):
//   - Base chains run by hook, in priority order. A packet from one of
//     the node's addresses (or loopback) takes the output hook, then
//     postrouting, and, when its destination is still local, the
//     prerouting and input hooks of the loopback delivery. Any other
//     packet takes prerouting, then input (destination local after DNAT)
//     or forward and postrouting. NAT chains decide once per connection
//     and direction, as conntrack does: the loopback delivery skips them.
//   - It is the first packet of a connection: "ct state new" holds,
//     dynamic sets (affinity) hold what the Fake holds, normally nothing.
//   - Randomness is enumerated, not sampled: "numgen random mod N" splits
//     the packet into weighted branches (a map's interval of k values
//     gets k/N), so shares are exact. Branches that end differently
//     (a forward and a reject, a masqueraded and a plain one) are an
//     error, as a Verdict cannot say it.
//   - Masquerade is whether the packet carried the masquerade mark
//     (Tracer.MasqMark) when it was DNATed, as kube-proxy's tracer reads
//     the jump to mark-for-masquerade, or a masquerade statement ran for
//     another reason. The hairpin rule (a lookup in Tracer.HairpinSet) is
//     taken as no match: by definition the hairpin case is masqueraded
//     by every mode and not reported. A marked packet delivered locally
//     (an endpoint on the node's own address) never reaches postrouting,
//     so the kernel does not masquerade it; it is still reported as
//     masqueraded, and the path says so.
//   - Only the expressions the mode renders are understood (address,
//     protocol and port matches, literals, named sets, concatenations,
//     verdict maps, fib local, ct state new, mark, numgen, dnat,
//     masquerade, reject, affinity updates, jump/goto/return/accept/drop).
//     Anything else is an error naming the rule, never skipped: a tracer
//     that ignored an expression would agree with anything.
package nftablestest
