package certfile_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	clocktesting "k8s.io/utils/clock/testing"

	"github.com/switchyard-proxy/switchyard/certfile"
)

type countingChecker struct{ n atomic.Int32 }

func (c *countingChecker) Check() bool { c.n.Add(1); return false }

// TestWatch looks at every checker once per interval and returns when
// its context ends.
func TestWatch(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Now())
	a, b := &countingChecker{}, &countingChecker{}
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- certfile.Watch(ctx, clk, time.Minute, a, b) }()
	for round := int32(1); round <= 3; round++ {
		waitFor(t, clk.HasWaiters)
		clk.Step(time.Minute)
		waitFor(t, func() bool { return a.n.Load() == round && b.n.Load() == round })
	}
	cancel()
	if err := <-done; err != nil {
		t.Errorf("Watch = %v, want nil", err)
	}
}

// waitFor polls cond until it holds, failing the test after 10 s.
func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not met within 10s")
		}
		time.Sleep(time.Millisecond) // poll for the condition
	}
}
