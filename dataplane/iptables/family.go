package iptables

import (
	"fmt"
	"net/netip"

	"github.com/switchyard-proxy/switchyard/dataplane/serviceport"
)

// Family is the IP family one ruleset is rendered for.
type Family int

const (
	// IPv4 is programmed with iptables.
	IPv4 Family = 4
	// IPv6 is programmed with ip6tables.
	IPv6 Family = 6
)

func (f Family) String() string { return serviceport.Family(f).String() }

// shardMatch returns the "-d addr/mask" value that selects shard i of
// 1<<bits shards by the low bits of the destination address.
func (f Family) shardMatch(i, bits int) string {
	mask := (1 << bits) - 1
	if f == IPv6 {
		return fmt.Sprintf("::%x/::%x", i, mask)
	}
	return fmt.Sprintf("0.0.0.%d/0.0.0.%d", i, mask)
}

// shardOf returns the shard of destination a.
func shardOf(a netip.Addr, bits int) int {
	b := a.As16()
	return int(b[15]) & ((1 << bits) - 1)
}

// RestoreCmd and SaveCmd name the binaries for the family and flavour
// (the IPVS mode's fixed rules use them too).
func (f Family) RestoreCmd(fl Flavour) string { return f.binary(fl) + "-restore" }

// SaveCmd is RestoreCmd's iptables-save.
func (f Family) SaveCmd(fl Flavour) string { return f.binary(fl) + "-save" }

func (f Family) binary(fl Flavour) string {
	base := "iptables"
	if f == IPv6 {
		base = "ip6tables"
	}
	switch fl {
	case FlavourLegacy:
		return base + "-legacy"
	case FlavourNFT:
		return base + "-nft"
	}
	return base
}

// hairpinSet names the family's hairpin ipset; ipsetFamily is its
// "family" option.
func (f Family) hairpinSet() string {
	if f == IPv6 {
		return hairpinSetV6
	}
	return hairpinSetV4
}

func (f Family) ipsetFamily() string {
	if f == IPv6 {
		return "inet6"
	}
	return "inet"
}

// loopback is the family's loopback range, which never serves node
// ports.
func (f Family) loopback() string {
	if f == IPv6 {
		return "::1/128"
	}
	return "127.0.0.0/8"
}
