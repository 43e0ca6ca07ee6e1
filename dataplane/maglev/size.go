package maglev

// Table sizes. Every slot becomes one element of an nftables map (slot
// index to endpoint), so the size is memory in the kernel and elements
// written on every full sync: 65,521 slots for each of thousands of
// service ports would be hundreds of millions of elements. The bounds:
//   - MinSize keeps small services fine-grained: with 2 endpoints the
//     shares differ by at most one slot in 509 (0.2 %).
//   - MaxSize is the largest prime below 2^16, so a slot index and a
//     backend index each fit in 16 bits. Past 255 endpoints the table holds
//     fewer than 256 slots per endpoint and flows beyond the changed
//     endpoint's move on a change; more than MaxSize endpoints cannot be
//     tabled at all.
const (
	MinSize = 509
	MaxSize = 65521
	// slotsPerBackend: at least 256 slots per endpoint. The Maglev
	// paper's M >= 100·N balances well, but a change then also moves
	// ~3 % of the flows that stay on their endpoints (removing one of 10
	// endpoints moved 12.7–13.8 % of flows at 1,021 slots, against the
	// 10 % that were on it); at 256–512 slots per endpoint that excess is
	// ~1 point (10.7–11.4 % at 4,093 slots).
	slotsPerBackend = 256
)

// tiers are the only sizes Size returns: primes just below the powers
// of two from 2^9 to 2^16. With 256 slots per endpoint the size changes
// only when the endpoint count crosses a power of two (4, 8, 16, … 256),
// and keeps 256–512 slots per endpoint in between. The size must not
// follow every endpoint change: the slot of a flow is
// reciprocal_scale(hash, size) and every backend's permutation is taken
// mod size, so a new size reshuffles all flows, not just the changed
// backend's.
var tiers = [...]int{509, 1021, 2039, 4093, 8191, 16381, 32749, 65521}

// Size returns the table size for n endpoints: the smallest tier with at
// least 256 slots per endpoint, at most MaxSize; 0 for n <= 0 (no table).
//
// It is stateless on purpose. Hysteresis (keep the size in use while it
// is neither crowded nor oversized) would spare the flows at a tier edge,
// but the size in use would then depend on each control-plane replica's
// history: a replica started after a scale-up picks a different size from
// one that lived through it, and nodes connected to the two would send
// one flow to two endpoints. Every replica and every node must agree, so
// the size depends on the endpoint count alone, and crossing a tier edge
// (n = 4, 8, 16, … 256) moves most flows once.
func Size(n int) int {
	if n <= 0 {
		return 0
	}
	for _, t := range tiers {
		if t >= slotsPerBackend*n {
			return t
		}
	}
	return MaxSize
}

// isPrime is trial division; sizes are at most MaxSize, so at most ~128
// divisions.
func isPrime(n int) bool {
	if n < 2 {
		return false
	}
	for d := 2; d*d <= n; d++ {
		if n%d == 0 {
			return false
		}
	}
	return true
}
