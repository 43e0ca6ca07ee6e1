package fleetlatency

import (
	"math"
	"sync/atomic"
	"time"
)

const (
	// perDoubling buckets split each doubling of latency: a bucket's upper
	// bound is 2^(1/8) = 1.0905 times its lower one.
	perDoubling = 8
	// doublings from minLatency: the last finite bound is 2^20 ms.
	doublings = 20
	// minLatency is the first bucket's upper bound.
	minLatency = time.Millisecond
	// numBuckets: one up to minLatency, perDoubling·doublings above it,
	// one beyond the last bound.
	numBuckets = perDoubling*doublings + 2
	overflow   = numBuckets - 1
)

// bucket returns the index of the bucket counting d: 0 for d ≤ 1ms, i for
// 1ms·2^((i-1)/8) < d ≤ 1ms·2^(i/8), overflow beyond 2^20 ms.
func bucket(d time.Duration) int {
	if d <= minLatency {
		return 0
	}
	i := int(math.Ceil(math.Log2(float64(d)/float64(minLatency)) * perDoubling))
	switch {
	case i < 1:
		return 1
	case i >= overflow:
		return overflow
	}
	return i
}

// upperBound is the largest latency bucket i counts (rounded up to the
// nanosecond); the overflow bucket has none (math.MaxInt64).
func upperBound(i int) time.Duration {
	if i >= overflow {
		return math.MaxInt64
	}
	return time.Duration(math.Ceil(float64(minLatency) * math.Exp2(float64(i)/perDoubling)))
}

// histogram counts latencies; safe for concurrent add, read with
// snapshot. reset needs the caller to exclude add and snapshot.
type histogram struct {
	// max first: next to its entry's header, an add touches two cache
	// lines, not three.
	max    atomic.Int64 // the largest latency added, in nanoseconds
	counts [numBuckets]atomic.Uint32
}

func (h *histogram) add(d time.Duration) {
	d = max(d, 0)
	h.counts[bucket(d)].Add(1)
	for {
		m := h.max.Load()
		if int64(d) <= m || h.max.CompareAndSwap(m, int64(d)) {
			return
		}
	}
}

func (h *histogram) reset() {
	for i := range h.counts {
		h.counts[i].Store(0)
	}
	h.max.Store(0)
}

// snapshot copies the counts. Adds racing with it may be half seen (a
// count without its max or the reverse); quantiles stay within a bucket.
func (h *histogram) snapshot() (counts [numBuckets]uint32, n int, largest time.Duration) {
	for i := range h.counts {
		counts[i] = h.counts[i].Load()
		n += int(counts[i])
	}
	return counts, n, time.Duration(h.max.Load())
}
