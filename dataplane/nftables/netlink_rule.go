package nftables

import (
	"net/netip"

	"github.com/google/nftables/expr"
	"golang.org/x/sys/unix"

	"github.com/switchyard-proxy/switchyard/dataplane"
)

// The expressions of the rule forms (rule.go) that take more than one
// or two: address loads and the two dnat statements.

// loadAddr loads the source or destination address into register 1.
func loadAddr(fam dataplane.Family, which string) *expr.Payload {
	p := &expr.Payload{DestRegister: 1, Base: expr.PayloadBaseNetworkHeader, Offset: 12, Len: 4}
	if which == "daddr" {
		p.Offset = 16
	}
	if fam == dataplane.IPv6 {
		p.Offset, p.Len = 8, 16
		if which == "daddr" {
			p.Offset = 24
		}
	}
	return p
}

// dnat is "dnat to ADDR:PORT": address in register 1, port in register 2,
// flags NF_NAT_RANGE_PROTO_SPECIFIED (the kernel adds MAP_IPS itself).
func dnat(fam dataplane.Family, ap netip.AddrPort) []expr.Any {
	nfproto := uint32(unix.NFPROTO_IPV4)
	if fam == dataplane.IPv6 {
		nfproto = unix.NFPROTO_IPV6
	}
	port := ap.Port()
	return []expr.Any{
		&expr.Immediate{Register: 1, Data: ap.Addr().AsSlice()},
		&expr.Immediate{Register: 2, Data: []byte{byte(port >> 8), byte(port)}},
		&expr.NAT{Type: expr.NATTypeDestNAT, Family: nfproto, RegAddrMin: 1, RegProtoMin: 2, Specified: true},
	}
}

// dnatMap is "dnat IP addr . port to numgen random mod 65536 map @SET":
// draw a slot, turn it big-endian as the interval map's keys are, look
// up address and port (the port lands in the 32-bit register after the
// address: 9 after reg 1's 4 bytes, 2 after its 16), translate.
func dnatMap(fam dataplane.Family, offset uint32, set string) []expr.Any {
	nfproto, portReg := uint32(unix.NFPROTO_IPV4), uint32(9)
	if fam == dataplane.IPv6 {
		nfproto, portReg = unix.NFPROTO_IPV6, 2
	}
	return []expr.Any{
		&expr.Numgen{Register: 1, Modulus: slots, Type: unix.NFT_NG_RANDOM, Offset: offset},
		&expr.Byteorder{SourceRegister: 1, DestRegister: 1, Op: expr.ByteorderHton, Len: 4, Size: 4},
		&expr.Lookup{SourceRegister: 1, DestRegister: 1, IsDestRegSet: true, SetName: set},
		&expr.NAT{Type: expr.NATTypeDestNAT, Family: nfproto, RegAddrMin: 1, RegProtoMin: portReg, Specified: true},
	}
}
