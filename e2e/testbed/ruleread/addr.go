package ruleread

import (
	"bytes"
	"net/netip"
)

// HoldsAddr reports whether a occurs in text as a whole address, not as
// part of a longer one (10.244.1.5 in 10.244.1.50). In rules it is
// followed by ":port" in iptables DNAT targets and kube-proxy's comments,
// by "/32" in matches, by " . port" in nftables map elements, and by
// "/port" in kube-proxy's nftables endpoint chain names, so the bound is
// any byte that cannot continue the address, not a fixed separator.
func HoldsAddr(text []byte, a netip.Addr) bool {
	if !a.IsValid() {
		return false // the zero Addr has no text to find
	}
	needle := a.AppendTo(make([]byte, 0, len("255.255.255.255")))
	for rest := text; ; {
		i := bytes.Index(rest, needle)
		if i < 0 {
			return false
		}
		end := i + len(needle)
		before := i == 0 || !isAddrByte(rest[i-1])
		after := end == len(rest) || !isAddrByte(rest[end])
		if before && after {
			return true
		}
		rest = rest[i+1:]
	}
}

// CountAddrs counts the distinct addresses of want that occur in text as
// whole addresses, looking only at those that start with prefix: a full
// dump is megabytes of rules and the wanted addresses (a Service range's)
// share a prefix little else starts with, so only those few are parsed.
// Every address of want must start with prefix to be counted.
func CountAddrs(text []byte, prefix string, want map[netip.Addr]bool) int {
	p := []byte(prefix)
	seen := make(map[netip.Addr]bool, len(want))
	for rest := text; len(rest) > 0; {
		i := bytes.Index(rest, p)
		if i < 0 {
			break
		}
		if i > 0 && isAddrByte(rest[i-1]) { // 10.96. inside 110.96.
			rest = rest[i+len(p):]
			continue
		}
		j := i + len(p)
		for j < len(rest) && isAddrByte(rest[j]) {
			j++
		}
		if a, err := netip.ParseAddr(string(rest[i:j])); err == nil && want[a] {
			seen[a] = true
		}
		rest = rest[max(j, i+1):] // an empty prefix still moves on
	}
	return len(seen)
}

// isAddrByte is a byte that can continue a dotted IPv4 address.
func isAddrByte(b byte) bool { return b == '.' || (b >= '0' && b <= '9') }
