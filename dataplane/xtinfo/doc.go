// Package xtinfo reads what the kernel reports about an iptables-legacy
// (x_tables) table without reading the table: the getsockopt
// IPT_SO_GET_INFO (IP6T_SO_GET_INFO for ip6tables) on a raw socket
// returns the table's number of entries, the size of its rule blob and
// the offsets of its built-in chains. Every legacy change replaces the
// whole blob, and one that adds, deletes or flushes a rule or a chain
// changes the entry count or the size; reading them costs one system
// call, where iptables-legacy-save copies and prints the whole blob
// (0.15–0.18 s of CPU at 1,000 services, measured). It is the legacy counterpart of
// package nftgen: the cheap half of a drift check.
//
// # Invariants
//   - A Reader reads the namespace its dialer's sockets were created in.
//   - Asking for a table makes the kernel instantiate it in that
//     namespace if it is not there yet, as any iptables-legacy command
//     does: ask only where legacy tables are in use, and never in the
//     machine's own namespace from a test.
//   - Info is a fingerprint, not a content hash: a rule replaced by one
//     of the same encoded size (another address, say) leaves it equal.
//
// Measured on kernel 6.18: 3–15 µs a table once the socket is open;
// adding, flushing and deleting rules and chains changed the entry
// count and size, replacing "-d 1.2.3.4" by "-d 1.2.3.5" did not.
// e2e/dataplane/iptables (drift_test.go) uses it on iptables-legacy.
package xtinfo
