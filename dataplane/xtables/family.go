package xtables

import "github.com/switchyard-proxy/switchyard/dataplane/serviceport"

// Family is the IP family one table set belongs to: IPv4 is read and
// written with iptables, IPv6 with ip6tables.
type Family int

const (
	// IPv4 is programmed with iptables.
	IPv4 Family = 4
	// IPv6 is programmed with ip6tables.
	IPv6 Family = 6
)

func (f Family) String() string { return serviceport.Family(f).String() }

// RestoreCmd and SaveCmd name the binaries for the family and flavour.
func (f Family) RestoreCmd(fl Flavour) string { return f.Binary(fl) + "-restore" }

// SaveCmd is RestoreCmd's iptables-save.
func (f Family) SaveCmd(fl Flavour) string { return f.Binary(fl) + "-save" }

// Binary names the family's iptables binary for fl: iptables or
// ip6tables, then -legacy or -nft unless fl is FlavourAuto.
func (f Family) Binary(fl Flavour) string {
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
