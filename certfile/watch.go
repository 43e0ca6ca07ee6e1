package certfile

import (
	"context"
	"time"

	"k8s.io/utils/clock"
)

// DefaultWatchInterval is how often Watch looks at the files: a rotation
// is noticed within it even when nothing connects. A look is a stat per
// file, and the files it watches change at most every few hours.
const DefaultWatchInterval = 10 * time.Second

// Checker is looked at by Watch: KeyPair and Bundle are.
type Checker interface {
	// Check looks now and reports whether something changed.
	Check() bool
}

var (
	_ Checker = (*KeyPair)(nil)
	_ Checker = (*Bundle)(nil)
)

// Watch calls Check on each of checkers every interval
// (DefaultWatchInterval when zero) until ctx ends, then returns nil.
// clk is the real clock when nil.
func Watch(ctx context.Context, clk clock.WithTicker, interval time.Duration, checkers ...Checker) error {
	if clk == nil {
		clk = clock.RealClock{}
	}
	if interval <= 0 {
		interval = DefaultWatchInterval
	}
	t := clk.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C():
			for _, c := range checkers {
				c.Check()
			}
		}
	}
}
