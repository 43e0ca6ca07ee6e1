// Package netns builds throwaway network-namespace topologies that stand in
// for a Kubernetes cluster in dataplane and end-to-end tests:
//
//	client ─┐                       ┌─ node-0 ── cbr0 ── pod-0, pod-2, …
//	control ┼── br0 (namespace net) ┼─ node-1 ── cbr0 ── pod-1, …
//	        └───────────────────────┘
//
// A Spec describes the shape, IPv4 only or dual-stack (Spec.DualStack:
// every address and route in IPv6 too); NewPlan turns it into names,
// addresses and routes without any I/O (see plan.go); Create (or New in tests) realises a
// Plan with `ip netns add` and netlink; Close tears it down.
//
// Invariants:
//   - The machine's own network namespace is never modified. Every entry point
//     that runs code or commands in a namespace (Exec, ExecInput, Do, Start,
//     the netlink handles and sysctl writes used while building) first passes
//     HostGuard, which refuses the namespace of this process, init_net and,
//     where readable, PID 1's. A namespace is accepted only if the topology
//     created it, its inode still matches, and it held nothing but lo when
//     created. No link, bridge or route is ever created in the host
//     namespace: veth pairs are created inside the "net" or node namespace
//     with their peer placed directly in the target.
//   - A Topology only acts on namespaces it created, identified by name and by
//     the (device, inode) pair recorded at creation.
//   - Do runs its function on a dedicated OS thread and unlocks that thread
//     only after the original namespace was restored; if restoring fails the
//     thread stays locked and the Go runtime destroys it.
//   - Close kills every process started in the topology by PID and waits for
//     it, kills any untracked process still living in one of its namespaces,
//     and only then deletes the namespaces (ip netns del does not kill
//     processes). It runs even after a failed test and reports namespaces that
//     survive.
package netns
