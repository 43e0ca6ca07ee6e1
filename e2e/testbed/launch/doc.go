// Package launch starts the test bed's long-running processes — the real
// Kubernetes components, containerd, kubelets, Switchyard's own binaries —
// inside network namespaces, with one log file each, and stops them by PID.
//
// A process enters its namespace through nsenter, never `ip netns exec`:
// that also unshares the mount namespace and remounts /sys, which hides the
// cgroup mounts runc and kubelet need. Spec.NetNS names a network-namespace
// file (/run/netns/NAME or /proc/PID/ns/net); Spec.Target instead joins
// every namespace of a holder process (a node: network, mount and UTS).
// Spec.Loopback is the one exception: a process that only listens and
// dials on 127.0.0.1 or unix sockets (the control plane beside the test
// bed's API server) runs in this process's own namespaces.
//
// Around a start: BuildSwitchyard compiles switchyard-controlplane and
// switchyard-agent (build.go); LoopbackAddrs picks ports for a Loopback
// process's flags, WaitReady polls a probe such as HTTPReady until the
// process serves or fails with its log's tail when it exits (ready.go);
// ScrapeMetrics reads a /metrics endpoint (metrics.go); ReadMemory and RSS
// read /proc/PID/status (memory.go).
//
// Invariants:
//   - Nothing is started in the machine's own network namespace unless the
//     spec says Loopback: the namespace file is checked against a
//     [netns.HostGuard] before the start, and a spec naming no namespace
//     (or naming one without a guard) is refused.
//   - Every process runs in its own process group with Pdeathsig SIGKILL,
//     so none outlives the Go process that started it.
//   - Stop signals the group (SIGTERM, SIGKILL after the grace period) and
//     returns only after the leader was reaped; it never signals a PID it
//     did not start.
//   - BuildSwitchyard builds with CGO_ENABLED=0 and -trimpath, as the
//     Makefile and hack/testbed-build.sh do, so every caller shares one
//     build cache.
package launch
