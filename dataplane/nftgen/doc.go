// Package nftgen reads the nf_tables ruleset generation of a network
// namespace: the number the kernel bumps by one at every committed
// nf_tables transaction, whoever sends it (nft, google/nftables,
// iptables-nft, firewalld, …). Two equal readings mean no nf_tables
// object of the namespace changed in between, which makes it the cheap
// half of a drift check (dataplane.DriftChecker): a few microseconds and
// one small message pair, however large the ruleset.
//
// The request is NFT_MSG_GETGEN (an nfgenmsg of family AF_UNSPEC and no
// attributes) on a NETLINK_NETFILTER socket; the reply is NFT_MSG_NEWGEN
// carrying NFTA_GEN_ID (big-endian, as every nf_tables attribute) and,
// since Linux 5.x, the pid and name of the process that committed last.
// github.com/google/nftables parses that reply (GenMsg) but offers no way
// to ask for it, so this package builds the request and parses the reply
// itself with github.com/mdlayher/netlink.
//
// # Invariants
//   - The generation is per network namespace: a Reader reads the
//     namespace its dialer's socket was created in, nothing else.
//   - Only successful commits bump it (an aborted batch does not), by
//     exactly one each, skipping 0 when it wraps: a caller that counts
//     its own commits can tell whether another writer committed in
//     between (Since).
//   - Nothing here writes to the kernel.
//   - iptables-legacy does not use nf_tables: its changes never show
//     here (package xtinfo is its counterpart).
//
// Measured on kernel 6.18 in throwaway namespaces: one nft -f, one
// google/nftables batch and one non-empty table block of
// iptables-nft-restore each bump it by one; an empty block, a listing
// and ipset do not. e2e/dataplane/nftables and e2e/dataplane/iptables
// (drift_test.go) rely on that count after every kind of sync.
package nftgen
