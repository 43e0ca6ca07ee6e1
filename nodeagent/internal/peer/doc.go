// Package peer is what the agent knows of kube-proxy on its node, the
// other proxy it takes the node over from and hands it back to
// (syncer.Peer; the hand-over itself is the syncer's handover.go):
// whether kube-proxy runs (Live) and says its rules are programmed
// (Healthy), whether its rules are back in the kernel after they were
// removed (Returned), and the removal of what it left once this agent
// forwards (Adopt).
//
//	agent starts ── Live, or its rules present? ── yes ─▶ handed to kube-proxy: the agent writes no rule
//	    │                              │ Live silent for 12 s (kube-proxy stopped; its rules stay)
//	    ▼                              ▼
//	forwarding: sync, then Adopt ◀── taken back: full sync
//	    │ Returned (its canary or nftables table reappears)
//	    ▼
//	handed to kube-proxy ─ Healthy ─▶ this agent's rules removed (the mode's Cleanup)
//
// Invariants:
//   - Nothing of kube-proxy's is removed before this agent's rules
//     forward, and nothing of this agent's before kube-proxy's healthz
//     answers 200: kube-proxy leaves its rules when it stops, so a node
//     always has one proxy's rules for every Service. In iptables mode the
//     two share chain names (and the very per-service chains: the names
//     are kube-proxy's hashes): Adopt removes only kube-proxy's evidence
//     in the back end the agent programs and asks for the full sync that
//     deletes kube-proxy's per-service chains it does not use; the mode's
//     Cleanup, with kube-proxy's canary present, removes only what
//     kube-proxy never names.
//   - Never two writers: while kube-proxy runs (at the agent's start, or
//     once its rules came back, also when a drift check is what sees
//     them) the agent writes no rule; it follows the view and takes the
//     node back, with a full sync, once kube-proxy's health stayed silent
//     for 12 s. kube-proxy's rules found at the start count as a running
//     kube-proxy until then: a starting kube-proxy writes its rules a
//     moment before it binds its health port.
//   - Live is a probe of kube-proxy's /healthz (its default
//     127.0.0.1:10256): any answer that is not this agent's own
//     (health.AgentHeader) is a kube-proxy process serving. A kube-proxy
//     with its health server off cannot be seen while it runs: the agent
//     takes it for stopped at start, and once it forwards sees it only by
//     its rules coming back. Returned reads only what is cheap to read
//     (kubeproxycleanup.Present), at every check.
//   - Adopt is idempotent: with nothing of kube-proxy's left it changes
//     nothing (kubeproxycleanup's evidence first).
package peer
