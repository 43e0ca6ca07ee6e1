// Package nftables holds the real-kernel tests and the benchmark of
// dataplane/nftables: a node namespace with three pods running echo
// servers and a client namespace, built by e2e/testbed. Every nft command
// runs inside the node namespace (forked from a thread that entered it),
// and the netlink sockets of Config.PartialNetlink are created on such a
// thread (nsNetlink); nothing touches the machine's own namespace. The tests need root and
// skip without it (fail when CI is set). drift_test.go and
// BenchmarkCheckDrift exercise CheckDrift, whose generation and
// read-back go over those sockets too.
package nftables
