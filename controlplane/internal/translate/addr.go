package translate

import (
	"net/netip"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"

	"github.com/switchyard-proxy/switchyard/controlplane/internal/model"
)

// parseAddr parses one API address. It accepts what kube-proxy's sloppy
// parser accepts (IPv4 with leading zeros, read as decimal), returns
// IPv4-mapped IPv6 as IPv4, and rejects zones and unspecified addresses.
func parseAddr(s string) (netip.Addr, bool) {
	addr, err := netip.ParseAddr(s)
	if err != nil {
		var ok bool
		if addr, ok = parseLegacyIPv4(s); !ok {
			return netip.Addr{}, false
		}
	}
	if addr.Zone() != "" {
		return netip.Addr{}, false
	}
	addr = addr.Unmap()
	if addr.IsUnspecified() {
		return netip.Addr{}, false
	}
	return addr, true
}

// parseLegacyIPv4 reads dotted-quad IPv4 whose octets may have leading
// zeros ("010.001.0.1"), which the API server accepted before 1.22 and
// kube-proxy still reads as decimal.
func parseLegacyIPv4(s string) (netip.Addr, bool) {
	parts := strings.Split(s, ".")
	if len(parts) != 4 {
		return netip.Addr{}, false
	}
	var octets [4]byte
	for i, p := range parts {
		if len(p) == 0 || len(p) > 3 || strings.Trim(p, "0123456789") != "" {
			return netip.Addr{}, false
		}
		n, err := strconv.Atoi(p)
		if err != nil || n > 255 {
			return netip.Addr{}, false
		}
		octets[i] = byte(n)
	}
	return netip.AddrFrom4(octets), true
}

// parsePrefix parses one CIDR, masked to its network, an IPv4-mapped IPv6
// prefix becoming the IPv4 prefix it covers.
func parsePrefix(s string) (netip.Prefix, bool) {
	prefix, err := netip.ParsePrefix(s)
	if err != nil {
		addrPart, bitsPart, found := strings.Cut(s, "/")
		if !found {
			return netip.Prefix{}, false
		}
		addr, ok := parseLegacyIPv4(addrPart)
		bits, err := strconv.Atoi(bitsPart)
		if !ok || err != nil || bits < 0 || bits > 32 || strings.Trim(bitsPart, "0123456789") != "" {
			return netip.Prefix{}, false
		}
		prefix = netip.PrefixFrom(addr, bits)
	}
	addr := prefix.Addr()
	if addr.Zone() != "" {
		return netip.Prefix{}, false
	}
	if addr.Is4In6() {
		if prefix.Bits() < 96 {
			return netip.Prefix{}, false
		}
		prefix = netip.PrefixFrom(addr.Unmap(), prefix.Bits()-96)
	}
	return prefix.Masked(), true
}

// familyOf returns the family of a parsed, unmapped address.
func familyOf(addr netip.Addr) model.IPFamily {
	if addr.Is4() {
		return model.IPv4
	}
	return model.IPv6
}

// families is a set of address families.
type families uint8

func (f *families) add(fam model.IPFamily) { *f |= familyBit(fam) }

func (f families) has(fam model.IPFamily) bool { return f&familyBit(fam) != 0 }

func familyBit(fam model.IPFamily) families {
	if fam == model.IPv4 {
		return 1
	}
	return 2
}

// protocol maps an API protocol; "" is the API default, TCP.
func protocol(p corev1.Protocol) (model.Protocol, bool) {
	switch p {
	case corev1.ProtocolTCP, "":
		return model.ProtocolTCP, true
	case corev1.ProtocolUDP:
		return model.ProtocolUDP, true
	case corev1.ProtocolSCTP:
		return model.ProtocolSCTP, true
	}
	return 0, false
}

// portNumber converts a port that must be 1..65535.
func portNumber(p int32) (uint16, bool) {
	if p < 1 || p > 65535 {
		return 0, false
	}
	return uint16(p), true
}

// portKey identifies a port for duplicate detection.
type portKey struct {
	protocol model.Protocol
	port     uint16
}
