package maglev

// Table sizes. Every slot becomes one element of a per-service-port
// nftables map (slot index to endpoint), so the size is memory in the
// kernel and elements written on every full sync: 65,521 slots for each
// of thousands of service ports would be hundreds of millions of
// elements. The bounds:
//   - MinSize keeps small services fine-grained: with 2 endpoints the
//     shares differ by at most one slot in 251 (0.4 %).
//   - MaxSize is the largest prime below 2^16, so a slot index and a
//     backend index each fit in 16 bits. Past 655 endpoints the table holds
//     fewer than 100 slots per endpoint and the balance coarsens (1 slot in
//     65,521/N); more than MaxSize endpoints cannot be tabled at all.
const (
	MinSize = 251
	MaxSize = 65521
	// slotsPerBackend is the Maglev paper's M >= 100·N: shares then differ
	// by at most 1 % and a change moves few flows beyond the changed
	// backend's own.
	slotsPerBackend = 100
	// minSlotsPerBackend is how crowded Resize lets a table get before
	// growing it: at 50 slots per backend shares still differ by <= 2 %.
	minSlotsPerBackend = 50
	// shrinkFactor: Resize shrinks only a table this many times larger
	// than Size would pick, so a service oscillating around a tier edge
	// keeps its size.
	shrinkFactor = 4
)

// tiers are the only sizes Size and Resize return: primes just below the
// powers of two from 2^8 to 2^16, so the size of a service's table changes
// only when its endpoint count roughly doubles or halves. The size must
// not follow every endpoint change: the slot of a flow is
// reciprocal_scale(hash, size) and every backend's permutation is taken
// mod size, so a new size reshuffles all flows, not just the changed
// backend's.
var tiers = [...]int{251, 509, 1021, 2039, 4093, 8191, 16381, 32749, 65521}

// Size returns the table size for n endpoints: the smallest tier with at
// least 100 slots per endpoint, at least MinSize and at most MaxSize. It is
// stateless, so it agrees on every node and across restarts; 0 for n <= 0
// (no table). Crossing a tier edge (n = 3, 6, 11, 21, 41, 82, 164, 328)
// changes the size and so moves most flows: callers that remember the
// previous size should use Resize.
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

// Resize returns the size for n endpoints given the size in use, keeping
// current while it is a tier that is neither crowded (fewer than 50 slots
// per endpoint) nor oversized (more than four times Size(n)). It is the
// hysteresis around Size's tier edges: a service moving between 10 and 11
// endpoints keeps one size and only the changed endpoint's flows move.
// current 0 (or any non-tier) means no previous table and gives Size(n).
func Resize(current, n int) int {
	want := Size(n)
	if n <= 0 || !isTier(current) {
		return want
	}
	if current < want && current < minSlotsPerBackend*n {
		return want
	}
	if current > shrinkFactor*want {
		return want
	}
	return current
}

func isTier(size int) bool {
	for _, t := range tiers {
		if t == size {
			return true
		}
	}
	return false
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
