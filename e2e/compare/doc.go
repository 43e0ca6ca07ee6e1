// Package compare runs upstream kube-proxy and Switchyard side by side
// against one real kube-apiserver and the same services, and reports what
// each needs to program a node: first full sync, EndpointSlice change to
// rule present, and memory.
//
//	kube-apiserver + etcd (host loopback; test bed)
//	   │  M services × K endpoints, one Node, created through the API
//	   ├──relay──▶ kube-proxy --proxy-mode=iptables   in node namespace A
//	   ├──relay──▶ kube-proxy --proxy-mode=nftables   in node namespace B
//	   └─────────▶ switchyard-controlplane (host, unix socket)
//	                  └──▶ switchyard-agent --mode=iptables in node namespace C
//
// Per size (Config.Sizes) a fresh API server and workload; the proxies run
// one after the other, each in a throwaway topology from e2e/testbed/netns,
// so they never compete for the CPU with each other (they do with whatever
// else runs on the machine: compare ratios of one run, not absolute values
// across runs).
//
// How it measures, the same way for both proxies:
//   - first sync: from the process start (Switchyard: the control plane's
//     start, the agent is started when the control plane is ready) until a
//     rule dump of the node namespace (iptables-save -t nat, or nft list
//     table ip kube-proxy) holds the cluster IP of every service; the
//     dump's cost (PollMedianSeconds) is the resolution, and dumps pause at
//     least as long as the last one took, so they never take more than
//     half a core from the proxy. The proxy's own last-sync timestamp is
//     recorded beside it (FirstSyncMetricSeconds);
//   - change: one EndpointSlice update moves an endpoint to a fresh address;
//     from just before the update until a targeted read of that service's
//     own rules holds the address, reading from the write on (a proxy may
//     program it before the update's response arrives) (target.go: the chain its cluster IP
//     jumps to, found once in the first sync's dump, and in nftables mode
//     the named maps that chain refers to). A read costs milliseconds
//     whatever the table's size (ReadMedianSeconds, the resolution), so
//     nothing digests kube-proxy's 35k chains per change — `nft monitor`,
//     used before, spent minutes doing that at 5k services before it
//     reported anything. Both proxies also export kube-proxy's
//     network_programming_duration_seconds, recorded per change when
//     exactly one observation was added: a cross-check from the inside;
//   - memory: VmRSS and VmHWM of the node process (kube-proxy, or the
//     agent) after the changes, and the control plane's separately.
//
// Config.Runs repeats every proxy per size against the same API server
// and workload, interleaved, and the report summarises min and median over
// runs (summary.go); Config.BurnCPUs spins threads beside every proxy
// while it is measured, a repeatable "under load".
//
// Config.DataPath turns the comparison into a data-path benchmark
// (datapath.go, make datapath): the node gets one pod per endpoint, each
// serving a sink (e2e/testbed/traffic), every service's endpoints are
// those pods, and a sample of services (the first, the last and random
// ones by creation order, the same in every run) are also NodePort
// services. Instead of changes, once a proxy has synced and every sampled
// target connects from the client namespace (behind the node, so packets
// take PREROUTING), it times connects to the sampled cluster IPs and node
// ports, runs short connections in a closed loop (with the machine's CPU
// per connection) and one bulk transfer. A no-proxy baseline (none/direct)
// dials the pods themselves: the floor. Switchyard's userspace mode runs
// too (the service range made local on the node, as on a real one); its
// first sync is when every target connects (no rules to read).
//
// Switchyard's commands are built and started by e2e/testbed/launch
// (switchyard.go): the control plane as a Loopback process, the agent with
// nsenter into the node namespace after the topology's host guard.
//
// Invariants: nothing runs or is configured in the machine's network
// namespace except the API server, etcd and the control plane, which only
// use loopback and a unix socket. kube-proxy reaches the API server through
// a relay (nsnet.go) that listens inside its namespace and dials from the
// host, so no route or link is added anywhere. Flags that make kube-proxy
// write machine-wide settings are off (kubeProxyArgs). Every process is
// stopped by PID and every namespace deleted before Run returns, on
// success and on failure.
package compare
