// Package peer is what the agent knows of kube-proxy on its node, the
// other proxy it takes over from: whether kube-proxy runs (Live), and the
// removal of what kube-proxy left once this agent forwards (Adopt, run by
// the syncer after a successful sync; syncer.Config.AdoptPeer).
//
//	syncer (after a successful sync) ─▶ Adopt(dp) ─▶ Live? ── yes ─▶ ErrLive: kube-proxy's rules stay, retried
//	                                                    └─ no ─▶ kubeproxycleanup.Run (KeepShared in the
//	                                                             back end the iptables mode programs)
//
// Invariants:
//   - Nothing of kube-proxy's is removed before this agent's rules
//     forward: both proxies' nat rules translate the same Services to the
//     same endpoints, so a packet meets one or the other, never neither.
//     In iptables mode the two share chain names (and, since the names are
//     kube-proxy's own hashes, the very chains): only kube-proxy's evidence
//     (its canaries, the chains only it creates) goes, and the mode's next
//     full sync deletes kube-proxy's per-service chains it does not use;
//     Adopt asks for that sync.
//   - Nothing of kube-proxy's is removed while kube-proxy runs: it would
//     put it back at its next sync. Live is a probe of kube-proxy's
//     /healthz (its default 127.0.0.1:10256): any answer that is not this
//     agent's own (health.AgentHeader) is a kube-proxy process serving.
//     A kube-proxy whose health server is off cannot be seen: the agent
//     then takes it for stopped.
//   - Adopt is idempotent: with nothing of kube-proxy's left it changes
//     nothing (kubeproxycleanup's evidence first).
package peer
