package netns

import (
	"encoding/binary"
	"fmt"
	"net/netip"
)

// hostAddr returns host number n of the IPv4 prefix p, refusing the network
// and broadcast addresses.
func hostAddr(p netip.Prefix, n int) (netip.Addr, error) {
	size := uint64(1) << (32 - p.Bits())
	if n < 1 || uint64(n) >= size-1 {
		return netip.Addr{}, fmt.Errorf("host %d does not fit in %s (usable 1..%d)", n, p, size-2)
	}
	return addUint32(p.Masked().Addr(), uint32(n)), nil
}

// subnet returns the i-th prefix of length bits inside the IPv4 prefix p.
func subnet(p netip.Prefix, bits, i int) (netip.Prefix, error) {
	if bits < p.Bits() || bits > 32 {
		return netip.Prefix{}, fmt.Errorf("cannot cut /%d subnets out of %s", bits, p)
	}
	count := uint64(1) << (bits - p.Bits())
	if i < 0 || uint64(i) >= count {
		return netip.Prefix{}, fmt.Errorf("subnet %d of /%d does not fit in %s (%d available)", i, bits, p, count)
	}
	step := uint32(1) << (32 - bits)
	return netip.PrefixFrom(addUint32(p.Masked().Addr(), uint32(i)*step), bits), nil
}

func addUint32(a netip.Addr, n uint32) netip.Addr {
	b := a.As4()
	v := binary.BigEndian.Uint32(b[:]) + n
	binary.BigEndian.PutUint32(b[:], v)
	return netip.AddrFrom4(b)
}
