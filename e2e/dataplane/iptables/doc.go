// Package iptables holds the real-kernel tests of dataplane/iptables: a
// node namespace with three pods running echo servers and a client
// namespace, built by e2e/testbed. The dataplane runs every iptables
// command inside the node namespace; nothing touches the machine's own.
// The tests need root and skip without it (fail when CI is set).
// BenchmarkSync compares the mode with kube-proxy's structure, which
// only the benchmark renders (kubeProxyShape, kubeproxyshape_test.go).
// drift_test.go and BenchmarkCheckDrift exercise CheckDrift on both
// flavours, its marks read over sockets created on a thread inside the
// node namespace (the nf_tables generation, the x_tables info).
package iptables
