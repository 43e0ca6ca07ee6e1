// Package ipvs is the IPVS data plane: a virtual server per service
// address, port and protocol, real servers per endpoint, and the few
// things IPVS cannot do alone done by a fixed set of iptables rules that
// match ipsets, as kube-proxy's IPVS mode does.
//
// # What it programs
//
//   - Virtual servers for every cluster IP, external IP and load-balancer
//     IP of a service port, and one per node IP (NodeConfig.node_ips) for
//     its node port. Real servers are the endpoints the view chose for the
//     traffic: internal (cluster IPs) from local_endpoints when
//     internal_traffic_policy is LOCAL, else cluster_endpoints; external
//     (the rest) likewise by external_traffic_policy. Forwarding is
//     masquerade (NAT), weight 1. The scheduler comes from
//     NodeConfig.ipvs_scheduler (Config.Scheduler, default rr); ClientIP
//     affinity is IPVS persistence with the service's timeout.
//   - A virtual server with no real server to add is not created: the
//     packet then reaches the filter rules, which REJECT it (TCP reset,
//     answered at once even for connect() on the node) or DROP it as the
//     view says. One that exists keeps draining its old real servers.
//   - Service addresses (cluster, external, load-balancer IPs) are bound
//     as /32 or /128 to the dummy link kube-ipvs0, so the kernel delivers
//     them locally and IPVS takes them at LOCAL_IN; an address is removed
//     with the last service using it.
//   - ipsets (names start with SWYD-IPVS- for IPv4, SWYD-IPVS6- for IPv6):
//     members change with services; the iptables rules that match them
//     are the same whatever the services are (rules.go), so a change
//     writes set members, never rules. They masquerade off-cluster and
//     external traffic and hairpin (pod to its own service) traffic,
//     accept node ports, drop load-balancer traffic from outside
//     loadBalancerSourceRanges, REJECT / DROP services without endpoints,
//     and refuse new connections to other ports of service addresses
//     (they are local addresses: without that, a node daemon listening on
//     0.0.0.0 would answer on every cluster IP).
//   - ETP Local: node ports, external and load-balancer IPs of such
//     services use the local endpoints and are not masqueraded (their
//     ipsets are the *-LOCAL ones), so the client address is kept.
//     Unlike the iptables mode, pod traffic to such an address also stays
//     on local endpoints (IPVS cannot choose by source), as in kube-proxy.
//
// # Reconcile by difference
//
// Apply renders the state (render.go, no I/O) into the virtual servers,
// real servers, addresses, set members and rules it wants, and compares
// them with what the kernel holds: read back (IPVS dump, addresses of
// kube-ipvs0, ipset save, iptables-save) on the first Apply, with Full,
// and after any failure; otherwise what the last Apply left, so an
// unchanged state costs no kernel call at all. It then adds and updates,
// and deletes only what it owns and no longer wants. Order: sets and
// members first (rules refer to them), rules, virtual and real servers,
// then addresses (a bound address without its virtual server would reach
// local sockets); removals in reverse.
//
// Ownership: a virtual server is this mode's when its address is on
// kube-ipvs0 (or wanted there), or when its address is a node IP and its
// port is in this mode's node-port ipset (kept in the kernel, so it
// survives an agent restart). Chains and ipsets are ours by name prefix.
// Everything else is left alone. Cleanup (teardown.go) works without a
// prior Apply, reads nothing back when neither a set of ours nor an
// address on kube-ipvs0 exists (every agent start in another mode runs
// it), and leaves kube-ipvs0 and every virtual server where kube-proxy's
// canary chain shows that kube-proxy may own them.
//
// # Graceful termination
//
// A TCP or SCTP real server that is no longer wanted (its endpoint went
// away, or it is terminating while the set still has endpoints that are
// not) gets weight 0: the scheduler sends it no new connection while the
// established ones continue. Drain (each Apply, and Run every
// DrainInterval) deletes it once the kernel reports no active and no
// inactive connection, or when GracePeriod is over. UDP real servers are
// deleted at once and their conntrack entries flushed (dataplane/conntrack):
// UDP has no end of connection to wait for. A real server that is wanted
// again is re-weighted; as weights are compared with the kernel's on the
// first Apply, an agent restarted in the middle of a drain does not leave
// real servers stuck at weight 0 (kube-proxy issues 92019, 108319).
//
// # Leaving the mode: a drain, not a cut
//
// The mode sets net.ipv4.vs.conntrack=1 (the kernel's default is 0;
// kube-proxy sets it too) and expire_nodest_conn=1. With conntrack=1 an
// IPVS connection keeps one conntrack entry for its life, with no NAT
// binding of netfilter's, so when another mode's rules arrive (their
// DNAT at prerouting/output, priority -100, runs before IPVS's LOCAL_IN
// and LOCAL_OUT hooks) they take new connections only: the established
// ones are not NATed again, still reach the service address on
// kube-ipvs0 and IPVS's table, and keep their real server. They break
// only when the virtual server or the address goes (expire_nodest_conn
// drops their next packet), which is why Connections (dataplane.Drainer)
// exists: a mode switch applies the new mode and leaves this one until
// it counts 0 (nodeagent's leftovers, at most 15 min). IPVS counts a
// closed TCP connection as inactive until its TIME_WAIT ends (2 min, not
// settable with `ipvsadm --set`, which sets only the established, FIN_WAIT
// and UDP timeouts) and a UDP flow until the UDP timeout (300 s) after
// its last datagram, so the mode goes about that long after the last
// connection ended. With conntrack=0 every packet of an IPVS connection
// would be a new conntrack entry and the new mode's DNAT would take the
// established connections too, breaking them: the drain relies on
// conntrack=1. Measured in the Debian 6.1 guest under traffic
// (e2e/dataplane/ipvs, make ipvs-handover).
//
// # The kernel seam
//
// Kernel (IPVS, link, addresses, sysctls) and command.Runner (ipset and
// iptables binaries) are the only ways to the kernel; both bound to one
// namespace. NetlinkKernel is the real Kernel; NewKernel refuses a
// kernel without IPVS (ErrIPVSUnavailable), since moby/ipvs would silently
// program nothing. ipvstest.Fake is an in-memory stand-in for both seams.
package ipvs
