package xtables

import "github.com/switchyard-proxy/switchyard/dataplane"

// RestoreCmd names the iptables-restore binary of family f for the
// flavour: IPv4 is read and written with iptables, IPv6 with ip6tables.
func (fl Flavour) RestoreCmd(f dataplane.Family) string { return fl.Binary(f) + "-restore" }

// SaveCmd is RestoreCmd's iptables-save.
func (fl Flavour) SaveCmd(f dataplane.Family) string { return fl.Binary(f) + "-save" }

// Binary names the iptables binary of family f for the flavour: iptables
// or ip6tables, then -legacy or -nft unless fl is FlavourAuto.
func (fl Flavour) Binary(f dataplane.Family) string {
	base := "iptables"
	if f == dataplane.IPv6 {
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
