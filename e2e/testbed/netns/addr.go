package netns

import (
	"fmt"
	"math/big"
	"net/netip"
)

// hostAddr returns host number n of prefix p (either family), refusing the
// all-zeros and all-ones host parts: IPv4's network and broadcast
// addresses, IPv6's subnet-router anycast and its mirror.
func hostAddr(p netip.Prefix, n int) (netip.Addr, error) {
	hostBits := p.Addr().BitLen() - p.Bits()
	if n < 1 || (hostBits < 63 && uint64(n) >= (uint64(1)<<hostBits)-1) {
		return netip.Addr{}, fmt.Errorf("host %d does not fit in %s (usable 1..%s)", n, p, usable(hostBits))
	}
	return addShifted(p.Masked().Addr(), uint64(n), 0), nil
}

func usable(hostBits int) string {
	switch {
	case hostBits < 2:
		return "none"
	case hostBits >= 63:
		return "2^" + fmt.Sprint(hostBits) + "-2"
	}
	return fmt.Sprint((uint64(1) << hostBits) - 2)
}

// subnet returns the i-th prefix of length bits inside prefix p (either
// family).
func subnet(p netip.Prefix, bits, i int) (netip.Prefix, error) {
	if bits < p.Bits() || bits > p.Addr().BitLen() {
		return netip.Prefix{}, fmt.Errorf("cannot cut /%d subnets out of %s", bits, p)
	}
	grow := bits - p.Bits()
	if i < 0 || (grow < 63 && uint64(i) >= uint64(1)<<grow) {
		return netip.Prefix{}, fmt.Errorf("subnet %d of /%d does not fit in %s (%d available)", i, bits, p, uint64(1)<<grow)
	}
	return netip.PrefixFrom(addShifted(p.Masked().Addr(), uint64(i), p.Addr().BitLen()-bits), bits), nil
}

// addShifted returns a + n<<shift, reading the address as one big-endian
// integer of its family's width. Callers keep the sum inside a prefix of
// a, so it never carries out of the address.
func addShifted(a netip.Addr, n uint64, shift int) netip.Addr {
	raw := a.AsSlice()
	v := new(big.Int).SetBytes(raw)
	v.Add(v, new(big.Int).Lsh(new(big.Int).SetUint64(n), uint(shift)))
	out, _ := netip.AddrFromSlice(v.FillBytes(make([]byte, len(raw))))
	return out
}
