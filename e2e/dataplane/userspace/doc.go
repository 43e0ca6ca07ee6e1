// Package userspace holds the real-traffic tests and benchmarks of
// dataplane/userspace: a node namespace running the proxy (its sockets
// opened inside the namespace through nsSockets), pods running echo
// servers and a client namespace, built by e2e/testbed. Service addresses
// are made local on the node with a local route (`ip route add local
// 10.96.0.0/16 dev lo`), so the proxy binds them directly and no netfilter
// rule is involved, except in the test of the documented REDIRECT rule.
// Nothing touches the machine's own namespace. The tests need root and
// skip without it (fail when CI is set).
package userspace
