package maglev

import (
	"encoding/hex"
	"net/netip"
	"testing"
)

// TestJHashVectors checks JHash against values whose origin is stated in
// each case: Bob Jenkins' lookup3.c self-test (hashlittle, which the
// kernel's jhash is on little-endian CPUs) and values a 6.18 kernel put in
// an nftables set (see TestKernelJHash for how).
func TestJHashVectors(t *testing.T) {
	for _, tc := range []struct {
		name          string
		key           []byte
		seed, modulus uint32 // modulus 0: the raw hash
		want          uint32
	}{
		{name: "lookup3 empty", key: nil, seed: 0, want: 0xdeadbeef},
		{name: "lookup3 empty seeded", key: nil, seed: 0xdeadbeef, want: 0xbd5b7dde},
		{name: "lookup3 four score", key: []byte("Four score and seven years ago"), seed: 0, want: 0x17770551},
		{name: "lookup3 four score seed 1", key: []byte("Four score and seven years ago"), seed: 1, want: 0xcd628161},
		{
			name: "kernel ip saddr . udp sport", seed: 0x12345678, modulus: 0xffffffff,
			key: FlowKey(netip.MustParseAddr("10.1.2.3"), 4567), want: 151274813,
		},
		{
			name: "kernel ip saddr", seed: 0x12345678, modulus: 1009,
			key: AddrKey(netip.MustParseAddr("10.1.2.3")), want: 0x2d8,
		},
		{
			name: "kernel ip6 saddr . udp sport", seed: 7, modulus: 0xffffffff,
			key: FlowKey(netip.MustParseAddr("::1"), 4567), want: 2549145912,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := JHash(tc.key, tc.seed)
			if tc.modulus != 0 {
				got = JHashMod(tc.key, tc.seed, tc.modulus)
			}
			if got != tc.want {
				t.Errorf("got %#x, want %#x", got, tc.want)
			}
		})
	}
}

// kernelJHash transliterates the kernel's jhash byte switch literally, as
// a second implementation to hold JHash's padded-tail shortcut against at
// every length around the 12-byte block edges.
func kernelJHash(k []byte, seed uint32) uint32 {
	length := uint32(len(k))
	a := jhashInitval + length + seed
	b, c := a, a
	for length > 12 {
		a += uint32(k[0]) | uint32(k[1])<<8 | uint32(k[2])<<16 | uint32(k[3])<<24
		b += uint32(k[4]) | uint32(k[5])<<8 | uint32(k[6])<<16 | uint32(k[7])<<24
		c += uint32(k[8]) | uint32(k[9])<<8 | uint32(k[10])<<16 | uint32(k[11])<<24
		a, b, c = jhashMix(a, b, c)
		length -= 12
		k = k[12:]
	}
	if length == 0 {
		return c
	}
	adds := []*uint32{&a, &a, &a, &a, &b, &b, &b, &b, &c, &c, &c, &c}
	for i := int(length) - 1; i >= 0; i-- {
		*adds[i] += uint32(k[i]) << (8 * (i % 4))
	}
	return jhashFinal(a, b, c)
}

func TestJHashLengths(t *testing.T) {
	data := make([]byte, 40)
	for i := range data {
		data[i] = byte(i*37 + 11)
	}
	for n := 0; n <= len(data); n++ {
		for _, seed := range []uint32{0, 1, 0x9e3779b9} {
			if got, want := JHash(data[:n], seed), kernelJHash(data[:n], seed); got != want {
				t.Errorf("len %d seed %#x: got %#x, want %#x", n, seed, got, want)
			}
		}
	}
}

func TestReciprocalScale(t *testing.T) {
	for _, tc := range []struct{ val, n, want uint32 }{
		{0, 1021, 0},
		{0xffffffff, 1021, 1020},
		{0x80000000, 1021, 510},
		{0x80000000, 2, 1},
		{12345, 0xffffffff, 12344}, // why a huge modulus reads the hash back
		{7, 1021, 0},               // not 7 % 1021
	} {
		if got := ReciprocalScale(tc.val, tc.n); got != tc.want {
			t.Errorf("ReciprocalScale(%#x, %d) = %d, want %d", tc.val, tc.n, got, tc.want)
		}
	}
}

// TestKeys pins the register layout nft --debug=netlink showed for the
// set keys of TestKernelJHash's probe: the port in network order, then two
// zero bytes.
func TestKeys(t *testing.T) {
	for _, tc := range []struct {
		name string
		got  []byte
		want string
	}{
		{"ip flow", FlowKey(netip.MustParseAddr("10.1.2.3"), 4567), "0a010203" + "11d70000"},
		{"ip addr", AddrKey(netip.MustParseAddr("10.1.2.3")), "0a010203"},
		{"ip6 flow", FlowKey(netip.MustParseAddr("fd00::1"), 80), "fd000000000000000000000000000001" + "00500000"},
		{"ip6 addr", AddrKey(netip.MustParseAddr("fd00::1")), "fd000000000000000000000000000001"},
		{"mapped", AddrKey(netip.MustParseAddr("::ffff:10.1.2.3")), "00000000000000000000ffff0a010203"},
		{"zero addr", FlowKey(netip.Addr{}, 80), ""},
	} {
		if got := hex.EncodeToString(tc.got); got != tc.want {
			t.Errorf("%s: got %s, want %s", tc.name, got, tc.want)
		}
	}
}
