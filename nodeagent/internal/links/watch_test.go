package links

import (
	"context"
	"errors"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"
	clocktesting "k8s.io/utils/clock/testing"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// fakeSource hands each subscription a listing, then the updates sent
// on its channel; fail ends the current subscription with an error.
type fakeSource struct {
	listing []Update
	more    chan Update
	fail    chan error
	subs    atomic.Int32
}

func (f *fakeSource) Subscribe(ctx context.Context, updates chan<- Update, errs chan<- error) error {
	f.subs.Add(1)
	listing := slices.Clone(f.listing)
	go func() {
		for _, u := range append(listing, Update{Index: listingDone}) {
			select {
			case updates <- u:
			case <-ctx.Done():
				return
			}
		}
		for {
			select {
			case <-ctx.Done():
				return
			case u := <-f.more:
				select {
				case updates <- u:
				case <-ctx.Done():
					return
				}
			case err := <-f.fail:
				errs <- err
				return
			}
		}
	}()
	return nil
}

// waitNames waits until w's names are want.
func waitNames(t *testing.T, w *Watcher, want ...string) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !slices.Equal(w.Names(), want) {
		if time.Now().After(deadline) {
			t.Fatalf("names %q, want %q", w.Names(), want)
		}
		time.Sleep(time.Millisecond)
	}
}

func TestWatcherFollowsLinks(t *testing.T) {
	src := &fakeSource{listing: []Update{{Index: 1, Name: "lo"}, {Index: 2, Name: "eth0"}}, more: make(chan Update), fail: make(chan error)}
	var changes atomic.Int32
	clk := clocktesting.NewFakeClock(time.Now())
	w := New(Config{Source: src, OnChange: func() { changes.Add(1) }, Clock: clk})
	if w.Names() != nil {
		t.Fatalf("names before the listing: %q", w.Names())
	}
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error)
	go func() { done <- w.Run(ctx) }()
	waitNames(t, w, "eth0", "lo")

	src.more <- Update{Index: 7, Name: "veth1"}
	waitNames(t, w, "eth0", "lo", "veth1")
	src.more <- Update{Index: 7, Name: "veth1"} // a state change: no OnChange
	src.more <- Update{Index: 7, Name: "pod0"}  // a rename
	waitNames(t, w, "eth0", "lo", "pod0")
	src.more <- Update{Index: 7, Name: "pod0", Deleted: true}
	waitNames(t, w, "eth0", "lo")
	if got := changes.Load(); got != 4 { // listing, add, rename, delete
		t.Errorf("OnChange called %d times, want 4", got)
	}

	// The subscription fails: a new one lists again, and what it lists
	// replaces what was known.
	src.listing = []Update{{Index: 1, Name: "lo"}, {Index: 9, Name: "eth9"}}
	src.fail <- errors.New("ENOBUFS")
	deadline := time.Now().Add(5 * time.Second)
	for !clk.HasWaiters() { // Run waits out its pause before subscribing again
		if time.Now().After(deadline) {
			t.Fatal("Run did not pause after the failure")
		}
		time.Sleep(time.Millisecond)
	}
	clk.Step(time.Second)
	waitNames(t, w, "eth9", "lo")
	if src.subs.Load() != 2 {
		t.Errorf("subscriptions: %d, want 2", src.subs.Load())
	}
	cancel()
	if err := <-done; err != nil {
		t.Errorf("Run: %v", err)
	}
}
