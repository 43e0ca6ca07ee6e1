package maglev

import (
	"encoding/binary"
	"math/bits"
	"net/netip"
)

// jhashInitval is JHASH_INITVAL of include/linux/jhash.h.
const jhashInitval = 0xdeadbeef

// JHash is the Linux kernel's jhash(key, length, initval)
// (include/linux/jhash.h: Bob Jenkins' lookup3 as adapted by Jozsef
// Kadlecsik), the hash behind nftables' `jhash` expression.
//
// The kernel reads whole 12-byte blocks with __get_unaligned_cpu32, that
// is in the CPU's byte order, and the last 1–12 bytes explicitly as
// little endian. JHash reads both as little endian, so it equals the
// kernel on little-endian CPUs (x86-64, arm64, the only ones we run).
// Keys of at most 12 bytes (IPv4 flows and addresses) hash the same on
// any CPU; longer ones (IPv6) would differ on a big-endian kernel.
func JHash(data []byte, seed uint32) uint32 {
	a := jhashInitval + uint32(len(data)) + seed
	b, c := a, a
	k := data
	for len(k) > 12 {
		a += binary.LittleEndian.Uint32(k[0:4])
		b += binary.LittleEndian.Uint32(k[4:8])
		c += binary.LittleEndian.Uint32(k[8:12])
		a, b, c = jhashMix(a, b, c)
		k = k[12:]
	}
	if len(k) == 0 {
		// The kernel's `case 0`: no final mix. Only an empty key gets
		// here, as a non-empty one leaves 1–12 bytes for the tail.
		return c
	}
	// The tail, padded with zero bytes to 12: the kernel's switch adds
	// the k[i] present at shifts 0, 8, 16, 24 of a, b, c, which is a
	// little-endian read of the zero-padded block.
	var tail [12]byte
	copy(tail[:], k)
	a += binary.LittleEndian.Uint32(tail[0:4])
	b += binary.LittleEndian.Uint32(tail[4:8])
	c += binary.LittleEndian.Uint32(tail[8:12])
	return jhashFinal(a, b, c)
}

// jhashMix is __jhash_mix.
func jhashMix(a, b, c uint32) (uint32, uint32, uint32) {
	a -= c
	a ^= bits.RotateLeft32(c, 4)
	c += b
	b -= a
	b ^= bits.RotateLeft32(a, 6)
	a += c
	c -= b
	c ^= bits.RotateLeft32(b, 8)
	b += a
	a -= c
	a ^= bits.RotateLeft32(c, 16)
	c += b
	b -= a
	b ^= bits.RotateLeft32(a, 19)
	a += c
	c -= b
	c ^= bits.RotateLeft32(b, 4)
	b += a
	return a, b, c
}

// jhashFinal is __jhash_final; only c is the result.
func jhashFinal(a, b, c uint32) uint32 {
	c ^= b
	c -= bits.RotateLeft32(b, 14)
	a ^= c
	a -= bits.RotateLeft32(c, 11)
	b ^= a
	b -= bits.RotateLeft32(a, 25)
	c ^= b
	c -= bits.RotateLeft32(b, 16)
	a ^= c
	a -= bits.RotateLeft32(c, 4)
	b ^= a
	b -= bits.RotateLeft32(a, 14)
	c ^= b
	c -= bits.RotateLeft32(b, 24)
	return c
}

// ReciprocalScale is the kernel's reciprocal_scale(val, n): val scaled
// from [0, 2^32) into [0, n) by multiplication, not modulo. It is what
// nftables' `jhash ... mod n` computes, despite the `mod` in its syntax
// (and the "%" of `nft --debug=netlink`).
func ReciprocalScale(val, n uint32) uint32 {
	return uint32(uint64(val) * uint64(n) >> 32)
}

// JHashMod is the value of the nftables expression
// `jhash <expr> mod modulus seed seed` (nft_jhash_eval in
// net/netfilter/nft_hash.c, without `offset`, which is added after
// scaling) for a packet whose <expr> registers hold key: see FlowKey and
// AddrKey.
func JHashMod(key []byte, seed, modulus uint32) uint32 {
	return ReciprocalScale(JHash(key, seed), modulus)
}

// FlowKey returns the register bytes nftables hashes for
// `jhash ip saddr . tcp sport` (`udp sport` loads the same two bytes) or,
// for an IPv6 address, `jhash ip6 saddr . tcp sport`: the address in
// network order, then the port in network order followed by two zero
// bytes. nft pads each element of a concatenation to a whole 32-bit
// register and the payload load zeroes the rest of a partial one, so the
// key is 8 bytes for IPv4 and 20 for IPv6 (nft --debug=netlink shows
// `jhash(reg 2, 8, seed)` and `jhash(reg 2, 20, seed)`). An address that
// is not IPv4 is hashed as 16 bytes, IPv4-mapped ones included, as
// `ip6 saddr` sees them; the zero Addr gives nil.
func FlowKey(addr netip.Addr, port uint16) []byte {
	key := AddrKey(addr)
	if key == nil {
		return nil
	}
	var reg [4]byte // the port's register: its two bytes, then the zeroes
	binary.BigEndian.PutUint16(reg[:2], port)
	return append(key, reg[:]...)
}

// AddrKey returns the register bytes nftables hashes for `jhash ip saddr`
// (4 bytes) or `jhash ip6 saddr` (16 bytes): the address in network
// order. IPv4-mapped IPv6 addresses give 16 bytes; the zero Addr gives nil.
func AddrKey(addr netip.Addr) []byte {
	switch {
	case addr.Is4():
		a := addr.As4()
		return a[:]
	case addr.Is6():
		a := addr.As16()
		return a[:]
	}
	return nil
}
