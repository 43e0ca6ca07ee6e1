// Package latency measures network programming latency on the real-cluster
// bed (e2e/cluster): from a pod becoming Ready (or going away) to the moment
// the service rules of every node hold (or no longer hold) its address, for
// whichever proxy the bed runs — Switchyard from deploy/, or upstream
// kube-proxy's own DaemonSet — so both are measured the same way.
//
//	harness (this process)                      bed
//	  pod + EndpointSlice informers ◀──watch── kube-apiserver ◀── kubelet (Ready), EndpointSlice controller
//	  Deployment scale (1→2→1…) ──────────────▶ kube-apiserver
//	  per node: iptables -t nat -S KUBE-SVC-… ─▶ node netns ◀── kube-proxy / switchyard-agent program it
//	            or nft list chain … + its maps
//	  per node: GET 127.0.0.1:10249/metrics ──▶ node netns (the proxy's own histogram)
//
// One event, alternating: scale Base→Base+1, then Base+1→Base.
//   - Start: for a scale-up, the harness's pod watch seeing the new pod's
//     Ready condition True; for a scale-down, seeing the deleted pod's
//     deletionTimestamp (it leaves the Service's ready endpoints then; its
//     Ready condition turns False only after the container exits). The
//     time the EndpointSlice watch saw the endpoint (un)ready is recorded
//     too and gives a second latency, without the EndpointSlice
//     controller's share.
//   - End, per node: the end of the first read of the Service's own rules
//     in the node's network namespace that holds the pod's address
//     (scale-up) or no longer does (scale-down). The chain is resolved
//     once per node (the cluster IP's rule in iptables-save, or its
//     element in the service-ips map); a read is one command (`iptables
//     -t nat -S <chain>`; `nft list chain …; list map …` with every map
//     the chain looks endpoints up in, keeping only the elements in the
//     key range the chain draws from, since Switchyard's endpoint maps
//     are shared within a shard). Reads repeat every ReadPause from the
//     start, so the end is late by at most one read and one pause
//     (NodeResult.ResolutionSeconds).
//   - The event's latency is the slowest node's. Then the harness waits
//     for the slice change (and a scale-down's pod to be gone) and Gap,
//     longer than both proxies' 1 s minimum sync interval, so no event
//     waits behind the previous one's sync.
//
// Cross-check: both proxies export kube-proxy's
// kubeproxy_network_programming_duration_seconds, measured from the
// slice's last-change-trigger-time, which is the pod's Ready
// lastTransitionTime in whole seconds. Each node's histogram is scraped
// at the start (beside the first reads, which it must not delay) and after
// the gap; a node-event that added exactly one observation after the
// first scrape has its value beside the harness's own time from the same
// truncated start (NodeResult.FromTransitionSeconds): the two should agree
// to within the read resolution.
//
// Invariants: every read and scrape runs inside a node's network
// namespace and every API call dials from the bed's client namespace
// (cluster.RESTConfig); nothing touches the machine's own namespace. The
// workload's namespace is deleted when Measure returns, so a test can go
// on using the bed. Measure never judges speed: it returns numbers, and an
// error only when the bed misbehaves (an event that never completes).
package latency
