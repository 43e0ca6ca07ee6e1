package discovery_test

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/switchyard-proxy/switchyard/nodeagent/internal/discovery"
	"github.com/switchyard-proxy/switchyard/nodeagent/internal/discovery/cptest"
	"github.com/switchyard-proxy/switchyard/nodeagent/internal/runtest"
)

// TestReconnectAsked: a Reconnect signal replaces the open stream with a
// new one to the same address (not the next of the dial list), after the
// shortest backoff, resuming from what was applied; the dial list's other
// address sees nothing, and nothing is applied again.
func TestReconnectAsked(t *testing.T) {
	cp, other := cptest.New(t), cptest.New(t)
	a := newApplier()
	clk := clocktesting.NewFakeClock(time.Now())
	reconnect := make(chan struct{})
	startWith(t, a, clk, func(c *discovery.Config) { c.Reconnect = reconnect }, cp.Addr(), other.Addr())
	cp.Next()
	cp.Push(batch("s1", "n1", svc("ns/a", "1")))
	wantACK(t, cp, "s1")

	reconnect <- struct{}{} // received: the stream listens
	// The shortest backoff, [Initial/2, Initial): 5-10 ms here.
	runtest.Eventually(t, "the backoff timer", clk.HasWaiters)
	clk.Step(10 * time.Millisecond)
	again := cp.Next()
	if again.Stream != 2 {
		t.Fatalf("request after the reconnect = %v, want stream 2 to the same address", again)
	}
	if diff := cmp.Diff(map[string]string{"ns/a": "1"}, again.GetInitialResourceVersions()); diff != "" {
		t.Errorf("initial_resource_versions (-want +got):\n%s", diff)
	}
	// Nothing changed: the first batch is empty, applied as nothing.
	cp.Push(batch("s1", "n2"))
	wantACK(t, cp, "s1")
	a.wantApplied(t, map[string]string{"ns/a": "1"})
	if n := other.Streams(); n != 0 {
		t.Errorf("the other address got %d streams, want 0", n)
	}
	a.mu.Lock()
	n := len(a.applied)
	a.mu.Unlock()
	if n != 2 {
		t.Errorf("%d applies, want 2 (the batch, then the empty resume)", n)
	}
}
