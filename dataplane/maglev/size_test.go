package maglev

import "testing"

func TestSize(t *testing.T) {
	for _, tc := range []struct{ n, want int }{
		{-1, 0}, {0, 0}, {1, 509}, {2, 1021}, {3, 1021}, {4, 2039}, {7, 2039},
		{8, 4093}, {10, 4093}, {11, 4093}, {15, 4093}, {16, 8191}, {31, 8191},
		{32, 16381}, {127, 32749}, {128, 65521}, {255, 65521}, {256, 65521},
		{100000, 65521},
	} {
		if got := Size(tc.n); got != tc.want {
			t.Errorf("Size(%d) = %d, want %d", tc.n, got, tc.want)
		}
	}
	for _, size := range tiers {
		if !isPrime(size) || size < MinSize || size > MaxSize {
			t.Errorf("tier %d: not a prime in [MinSize, MaxSize]", size)
		}
	}
}
