package iptables

import (
	"fmt"
	"net/netip"

	"github.com/switchyard-proxy/switchyard/dataplane"
)

// shardMatch returns the "-d addr/mask" value that selects shard i of
// 1<<bits shards by the low bits of the destination address.
func shardMatch(f dataplane.Family, i, bits int) string {
	mask := (1 << bits) - 1
	if f == dataplane.IPv6 {
		return fmt.Sprintf("::%x/::%x", i, mask)
	}
	return fmt.Sprintf("0.0.0.%d/0.0.0.%d", i, mask)
}

// shardOf returns the shard of destination a.
func shardOf(a netip.Addr, bits int) int {
	b := a.As16()
	return int(b[15]) & ((1 << bits) - 1)
}

// hairpinSet names the family's hairpin ipset.
func hairpinSet(f dataplane.Family) string {
	if f == dataplane.IPv6 {
		return hairpinSetV6
	}
	return hairpinSetV4
}

// loopback is the family's loopback range, which never serves node
// ports.
func loopback(f dataplane.Family) string {
	if f == dataplane.IPv6 {
		return "::1/128"
	}
	return "127.0.0.0/8"
}
