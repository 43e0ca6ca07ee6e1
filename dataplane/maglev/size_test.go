package maglev

import "testing"

func TestSize(t *testing.T) {
	for _, tc := range []struct{ n, want int }{
		{-1, 0}, {0, 0}, {1, 251}, {2, 251}, {3, 509}, {5, 509}, {6, 1021},
		{10, 1021}, {11, 2039}, {40, 4093}, {41, 8191}, {327, 32749},
		{328, 65521}, {655, 65521}, {656, 65521}, {100000, 65521},
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

func TestResize(t *testing.T) {
	for _, tc := range []struct {
		name             string
		current, n, want int
	}{
		{"no previous table", 0, 10, 1021},
		{"not a tier", 1009, 10, 1021},
		{"no endpoints", 1021, 0, 0},
		{"steady", 1021, 10, 1021},
		{"10 to 11 keeps the size", 1021, 11, 1021},
		{"11 to 10 keeps the size", 2039, 10, 2039},
		{"crowded grows", 1021, 21, 4093},
		{"20 per slot is still fine", 1021, 20, 1021},
		{"oversized shrinks", 2039, 5, 509},
		{"4x is kept", 2039, 6, 2039},
		{"max stays max", 65521, 2000, 65521},
		{"max shrinks when small", 65521, 1, 251},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := Resize(tc.current, tc.n); got != tc.want {
				t.Errorf("Resize(%d, %d) = %d, want %d", tc.current, tc.n, got, tc.want)
			}
		})
	}
}
