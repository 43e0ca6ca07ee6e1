package traffic

import (
	"testing"
	"time"
)

func TestQuantile(t *testing.T) {
	var ts []time.Duration
	for i := 1; i <= 100; i++ {
		ts = append(ts, time.Duration(i)*time.Microsecond)
	}
	for _, tc := range []struct {
		q    float64
		want time.Duration
	}{{0.5, 50 * time.Microsecond}, {0.9, 90 * time.Microsecond}, {0.99, 99 * time.Microsecond}, {1, 100 * time.Microsecond}} {
		if got := quantile(ts, tc.q); got != tc.want {
			t.Errorf("quantile(1..100 µs, %v) = %v, want %v", tc.q, got, tc.want)
		}
	}
	if got := quantile(nil, 0.5); got != 0 {
		t.Errorf("quantile(nil) = %v, want 0", got)
	}
}
