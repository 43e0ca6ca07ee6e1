package runtest

import (
	"context"
	"sync"
	"testing"
	"time"
)

// Timeout bounds every wait of Eventually.
const Timeout = 10 * time.Second

// Start runs run (a component's Run) in a goroutine with a context that
// stop cancels. stop then waits for run to return and fails the test
// when it returned an error. stop runs when the test ends, and at most
// once.
func Start(t testing.TB, run func(context.Context) error) (stop func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- run(ctx) }()
	stop = sync.OnceFunc(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	})
	t.Cleanup(stop)
	return stop
}

// Eventually polls cond until it holds, and fails the test when it does
// not within Timeout; what names the condition in the failure.
func Eventually(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(Timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(time.Millisecond) // poll interval, not a wait for an event
	}
}
