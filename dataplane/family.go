package dataplane

import (
	"fmt"
	"net/netip"
)

// Family is an IP family. Every mode programs each family apart (two
// iptables binaries, two nft tables, two conntrack tables), so the
// family names which of the pair; this is the one type every package
// under dataplane/ says it with.
type Family int

const (
	// IPv4 addresses (IPv4-mapped IPv6 ones count as IPv4).
	IPv4 Family = 4
	// IPv6 addresses.
	IPv6 Family = 6
)

func (f Family) String() string {
	if f == IPv6 {
		return "IPv6"
	}
	return "IPv4"
}

// Families is a mode's Config.Families checked: fams, or both families
// when fams is empty (every mode's default), and an error naming the
// first one that is neither IPv4 nor IPv6.
func Families(fams []Family) ([]Family, error) {
	if len(fams) == 0 {
		return []Family{IPv4, IPv6}, nil
	}
	for _, f := range fams {
		if f != IPv4 && f != IPv6 {
			return nil, fmt.Errorf("unknown family %d", f)
		}
	}
	return fams, nil
}

// Has reports whether a belongs to the family.
func (f Family) Has(a netip.Addr) bool {
	if f == IPv6 {
		return a.Is6() && !a.Is4In6()
	}
	return a.Is4() || a.Is4In6()
}

// ParseAddr parses an address of family f. ok is false for another
// family; err is set for text that is not an address, or is one with a
// zone (fe80::1%eth0), which no service or endpoint address carries and
// no rule could match.
func (f Family) ParseAddr(s string) (a netip.Addr, ok bool, err error) {
	a, err = netip.ParseAddr(s)
	if err != nil {
		return netip.Addr{}, false, fmt.Errorf("bad address %q: %w", s, err)
	}
	if a.Zone() != "" {
		return netip.Addr{}, false, fmt.Errorf("bad address %q: has a zone", s)
	}
	a = a.Unmap()
	return a, f.Has(a), nil
}

// ParsePrefix is ParseAddr for CIDRs; the prefix comes back masked.
func (f Family) ParsePrefix(s string) (netip.Prefix, bool, error) {
	p, err := netip.ParsePrefix(s)
	if err != nil {
		return netip.Prefix{}, false, fmt.Errorf("bad CIDR %q: %w", s, err)
	}
	p = p.Masked()
	return p, f.Has(p.Addr()), nil
}
