// Package canary proves that the node's programmed datapath forwards, so
// that /healthz and the load-balancer health-check node ports mean it.
//
// The agent adds a Service of its own, Name, to every state it applies
// (Decorate, the syncer's Decorator): its cluster IP and port are the
// operator's --datapath-canary, chosen inside the Service range and
// reserved there by a selector-less Service of the same name; its one
// endpoint is the node's own address (the NodeConfig's first node IP of
// the VIP's family) on --datapath-canary-port, where the agent listens.
// Every interval, Run connects from the node to the cluster IP, through
// the OUTPUT path and the rules the mode programmed, and checks that the
// answer is its listener's: a random token chosen at each start, so only
// a connection those rules DNATed to this very process passes.
//
//	Run ──connect VIP:port──▶ OUTPUT: the mode's DNAT ──▶ node IP:canary port ──token──▶ Run
//	                                                        (this package's listener)
//
// Invariants:
//   - Decorate does no I/O and costs O(changed) (O(services) on a full
//     sync): it is on every sync's path. The canary's service is built
//     again only when the node's address or name changes, so the
//     dataplane sees the same message.
//   - The canary never takes another Service's address, nor one outside
//     the Service ranges: while any Service but Name has its cluster IP
//     (the operator did not reserve it), or the NodeConfig's ranges
//     (service_cidrs, when the API serves ServiceCIDRs) do not hold it,
//     the canary is not programmed and probes are skipped, the reason
//     shown in /healthz (datapathError).
//   - Only a probe that ran and failed counts against the datapath:
//     Failures of them in a row make it unhealthy, one success healthy
//     again. A probe that cannot run (before the first successful sync,
//     without a node address of the VIP's family, with the listener's
//     port taken) leaves the datapath healthy: the agent not being able to
//     look is no evidence that forwarding is broken.
//   - Probes start an interval apart, never two at once; a probe gives up
//     after min(1s, interval/2).
//   - Run closes the listener and waits for its goroutine before it
//     returns.
package canary
