package admin

import (
	"testing"
	"time"
)

func TestRoughDuration(t *testing.T) {
	tests := []struct {
		d    time.Duration
		want string
	}{
		{0, "0s"},
		{-time.Second, "0s"},
		{999 * time.Microsecond, "1ms"},
		{1234 * time.Microsecond, "1.2ms"},
		{12345 * time.Microsecond, "12ms"},
		{309_400 * time.Microsecond, "310ms"},
		{1234 * time.Millisecond, "1.2s"},
		{9 * time.Second, "9s"},
		{134 * time.Second, "2m10s"},
		{17*time.Minute + 29*time.Second, "17m0s"},
	}
	for _, tt := range tests {
		if got := roughDuration(tt.d); got != tt.want {
			t.Errorf("roughDuration(%v) = %q, want %q", tt.d, got, tt.want)
		}
	}
}
