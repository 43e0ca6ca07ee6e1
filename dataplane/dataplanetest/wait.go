package dataplanetest

import (
	"runtime"
	"testing"
	"time"
)

// Eventually polls cond until it holds and fails the test when it does
// not within d; what names the condition in the failure. The modes'
// goroutines (userspace's proxies, IPVS's drain timer) move on their own
// schedule, so tests wait for an outcome with a deadline instead of
// sleeping a fixed time.
func Eventually(t testing.TB, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", d, what)
		}
		runtime.Gosched()
		time.Sleep(time.Millisecond)
	}
}
