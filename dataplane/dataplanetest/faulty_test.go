package dataplanetest

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/switchyard-proxy/switchyard/dataplane"
	switchyardv1 "github.com/switchyard-proxy/switchyard/proto/switchyard/v1"
)

// state builds a State from "name=ip" pairs.
func state(pairs ...string) *dataplane.State {
	st := &dataplane.State{Services: map[string]*switchyardv1.ServiceView{}}
	for i := 0; i+1 < len(pairs); i += 2 {
		st.Services[pairs[i]] = &switchyardv1.ServiceView{ClusterIps: []string{pairs[i+1]}}
	}
	return st
}

// dump is Fake.Dump of the state of "name=ip" pairs, for the wants below.
func dump(t testing.TB, pairs ...string) string {
	t.Helper()
	f := New("want")
	if err := f.Apply(t.Context(), state(pairs...), dataplane.ApplyOptions{}); err != nil {
		t.Fatal(err)
	}
	return f.Dump()
}

var errKernel = errors.New("iptables-restore: exit status 1")

func TestFaulty(t *testing.T) {
	open := make(chan struct{})   // never closed: a slow call that only ctx ends
	closed := make(chan struct{}) // a slow call already released
	close(closed)
	prev := state("ns/a", "10.0.0.1", "ns/b", "10.0.0.2", "ns/c", "10.0.0.3")
	// Against prev: ns/a altered, ns/b removed, ns/d added, ns/c kept.
	next := state("ns/a", "10.0.1.1", "ns/c", "10.0.0.3", "ns/d", "10.0.0.4")
	tests := []struct {
		name string
		// prev, when set, is applied without a fault first.
		prev     *dataplane.State
		op       string
		next     *dataplane.State
		fault    Fault
		canceled bool
		// innerErr fails the inner dataplane's calls.
		innerErr error
		// wantErrs must all be in the returned error's chain; none means
		// success.
		wantErrs []error
		// wantDump is the inner dataplane's applied state afterwards.
		wantDump string
		// wantInner counts the calls that reached the inner dataplane
		// (prev's included).
		wantInner   int
		wantChanged []string
	}{
		{
			name: "pass", prev: prev, op: OpApply, next: next,
			wantDump: dump(t, "ns/a", "10.0.1.1", "ns/c", "10.0.0.3", "ns/d", "10.0.0.4"), wantInner: 2,
		},
		{
			name: "fail leaves the inner dataplane alone", prev: prev, op: OpApply, next: next,
			fault:    Fault{Kind: Fail, Err: errKernel},
			wantErrs: []error{ErrInjected, errKernel},
			wantDump: dump(t, "ns/a", "10.0.0.1", "ns/b", "10.0.0.2", "ns/c", "10.0.0.3"), wantInner: 1,
		},
		{
			name: "partial: half of the changes, in name order", prev: prev, op: OpApply, next: next,
			fault:    Fault{Kind: Partial},
			wantErrs: []error{ErrInjected},
			// Three changes (a, b, d): one reaches the kernel.
			wantDump: dump(t, "ns/a", "10.0.1.1", "ns/b", "10.0.0.2", "ns/c", "10.0.0.3"), wantInner: 2,
			wantChanged: []string{"ns/a"},
		},
		{
			name: "partial: a removal is a change too", prev: prev, op: OpApply, next: next,
			fault:    Fault{Kind: Partial, Changes: 2, Err: errKernel},
			wantErrs: []error{ErrInjected, errKernel},
			wantDump: dump(t, "ns/a", "10.0.1.1", "ns/c", "10.0.0.3"), wantInner: 2,
			wantChanged: []string{"ns/a", "ns/b"},
		},
		{
			name: "partial: the first apply commits half of the services", op: OpApply, next: next,
			fault:    Fault{Kind: Partial},
			wantErrs: []error{ErrInjected},
			wantDump: dump(t, "ns/a", "10.0.1.1"), wantInner: 1,
			wantChanged: []string{"ns/a"},
		},
		{
			name: "partial: more changes than there are commits all", prev: prev, op: OpApply, next: next,
			fault:    Fault{Kind: Partial, Changes: 99},
			wantErrs: []error{ErrInjected},
			wantDump: dump(t, "ns/a", "10.0.1.1", "ns/c", "10.0.0.3", "ns/d", "10.0.0.4"), wantInner: 2,
			wantChanged: []string{"ns/a", "ns/b", "ns/d"},
		},
		{
			name: "partial: the inner failure is returned as well", op: OpApply, next: next,
			fault: Fault{Kind: Partial}, innerErr: errKernel,
			wantErrs:  []error{ErrInjected, errKernel},
			wantInner: 1, wantChanged: []string{"ns/a"},
		},
		{
			name: "slow, released: the inner apply runs", prev: prev, op: OpApply, next: next,
			fault:    Fault{Kind: Slow, Release: closed},
			wantDump: dump(t, "ns/a", "10.0.1.1", "ns/c", "10.0.0.3", "ns/d", "10.0.0.4"), wantInner: 2,
		},
		{
			name: "slow, canceled: the inner apply never runs", prev: prev, op: OpApply, next: next,
			fault: Fault{Kind: Slow, Release: open}, canceled: true,
			wantErrs: []error{context.Canceled},
			wantDump: dump(t, "ns/a", "10.0.0.1", "ns/b", "10.0.0.2", "ns/c", "10.0.0.3"), wantInner: 1,
		},
		{
			name: "cleanup fails: nothing removed", prev: prev, op: OpCleanup,
			fault:    Fault{Kind: Fail},
			wantErrs: []error{ErrInjected},
			wantDump: dump(t, "ns/a", "10.0.0.1", "ns/b", "10.0.0.2", "ns/c", "10.0.0.3"), wantInner: 1,
		},
		{
			name: "cleanup partial: removed, and an error all the same", prev: prev, op: OpCleanup,
			fault:    Fault{Kind: Partial},
			wantErrs: []error{ErrInjected}, wantInner: 2,
		},
		{
			name: "cleanup slow, canceled", prev: prev, op: OpCleanup,
			fault: Fault{Kind: Slow, Release: open}, canceled: true,
			wantErrs: []error{context.Canceled},
			wantDump: dump(t, "ns/a", "10.0.0.1", "ns/b", "10.0.0.2", "ns/c", "10.0.0.3"), wantInner: 1,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			inner := New("fake")
			f := NewFaulty(inner, nil)
			if tt.prev != nil {
				if err := f.Apply(t.Context(), tt.prev, dataplane.ApplyOptions{Full: true}); err != nil {
					t.Fatal(err)
				}
			}
			inner.SetHook(func(string, *dataplane.State, dataplane.ApplyOptions) error { return tt.innerErr })
			f.SetPlan(Script(tt.fault))
			ctx, cancel := context.WithCancel(t.Context())
			if tt.canceled {
				cancel()
			}
			defer cancel()
			var err error
			if tt.op == OpApply {
				err = f.Apply(ctx, tt.next, dataplane.ApplyOptions{})
			} else {
				err = f.Cleanup(ctx)
			}
			if len(tt.wantErrs) == 0 && err != nil {
				t.Fatalf("%s = %v, want success", tt.op, err)
			}
			for _, want := range tt.wantErrs {
				if !errors.Is(err, want) {
					t.Errorf("%s = %v, want %v in its chain", tt.op, err, want)
				}
			}
			if diff := cmp.Diff(tt.wantDump, inner.Dump()); diff != "" {
				t.Errorf("inner state (-want +got):\n%s", diff)
			}
			if got := len(inner.Calls()); got != tt.wantInner {
				t.Errorf("inner calls = %d, want %d", got, tt.wantInner)
			}
			var want []Injection
			if tt.fault.Kind != Pass {
				call := 0 // the faulted call follows prev's
				if tt.prev != nil {
					call = 1
				}
				want = []Injection{{Call: call, Op: tt.op, Fault: tt.fault,
					Changed: tt.wantChanged, Canceled: tt.canceled, Err: err}}
			}
			if diff := cmp.Diff(want, f.Injections(), cmp.Comparer(sameErr), cmp.Comparer(sameChan)); diff != "" {
				t.Errorf("Injections (-want +got):\n%s", diff)
			}
		})
	}
}

func sameErr(a, b error) bool            { return a == b }
func sameChan(a, b <-chan struct{}) bool { return a == b }

// TestFaultyPartialStartsFromWhatTheKernelHolds: a second half-way
// commit builds on the first one's result, not on the caller's idea of
// the previous state, as a kernel would.
func TestFaultyPartialStartsFromWhatTheKernelHolds(t *testing.T) {
	inner := New("fake")
	f := NewFaulty(inner, Script(Fault{Kind: Partial, Changes: 1}, Fault{Kind: Partial, Changes: 1}))
	want := state("ns/a", "10.0.0.1", "ns/b", "10.0.0.2", "ns/c", "10.0.0.3")
	for _, wantDump := range []string{dump(t, "ns/a", "10.0.0.1"), dump(t, "ns/a", "10.0.0.1", "ns/b", "10.0.0.2")} {
		if err := f.Apply(t.Context(), want, dataplane.ApplyOptions{}); !errors.Is(err, ErrInjected) {
			t.Fatalf("Apply = %v, want an injected error", err)
		}
		if diff := cmp.Diff(wantDump, inner.Dump()); diff != "" {
			t.Errorf("inner state (-want +got):\n%s", diff)
		}
	}
	if err := f.Apply(t.Context(), want, dataplane.ApplyOptions{}); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(dump(t, "ns/a", "10.0.0.1", "ns/b", "10.0.0.2", "ns/c", "10.0.0.3"), inner.Dump()); diff != "" {
		t.Errorf("after the plan ran out (-want +got):\n%s", diff)
	}
	if got := len(f.Injections()); got != 2 {
		t.Errorf("Injections = %d, want 2", got)
	}
}

// TestFaultySlowDelayOnAClock: a Slow fault's delay runs on the clock
// given, so a test releases it by stepping that clock; Waiting shows it
// under way meanwhile.
func TestFaultySlowDelayOnAClock(t *testing.T) {
	inner := New("fake")
	tick := make(chan time.Time, 1)
	var asked time.Duration
	f := NewFaulty(inner, Script(Fault{Kind: Slow, Delay: 5 * time.Second}), WithAfter(func(d time.Duration) <-chan time.Time {
		asked = d
		return tick
	}))
	done := make(chan error, 1)
	go func() { done <- f.Apply(t.Context(), state("ns/a", "10.0.0.1"), dataplane.ApplyOptions{}) }()
	deadline := time.Now().Add(10 * time.Second)
	for f.Waiting() != 1 {
		if time.Now().After(deadline) {
			t.Fatal("the slow apply never waited")
		}
		time.Sleep(time.Millisecond) // poll for the condition
	}
	if len(inner.Calls()) != 0 {
		t.Fatal("the inner apply ran before the delay ended")
	}
	tick <- time.Time{}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if asked != 5*time.Second {
		t.Errorf("delay asked = %v, want 5s", asked)
	}
	if f.Waiting() != 0 || len(inner.Calls()) != 1 {
		t.Errorf("Waiting = %d, inner calls = %d; want 0 and 1", f.Waiting(), len(inner.Calls()))
	}
}

// TestRandomPlan: a seed replays the same faults; the odds are honoured
// at their extremes and mixed in between.
func TestRandomPlan(t *testing.T) {
	kinds := func(p Plan, n int) []Kind {
		out := make([]Kind, n)
		for i := range out {
			out[i] = p(OpApply).Kind
		}
		return out
	}
	mixed := Odds{Fail: 0.2, Partial: 0.2, Slow: 0.2, Delay: time.Second}
	a, b := kinds(Random(7, mixed), 200), kinds(Random(7, mixed), 200)
	if diff := cmp.Diff(a, b); diff != "" {
		t.Errorf("same seed, other faults (-first +second):\n%s", diff)
	}
	if diff := cmp.Diff(a, kinds(Random(8, mixed), 200)); diff == "" {
		t.Error("seeds 7 and 8 drew the same 200 faults")
	}
	counts := map[Kind]int{}
	for _, k := range a {
		counts[k]++
	}
	for _, k := range []Kind{Pass, Fail, Partial, Slow} {
		// Each has odds of at least 0.2: 40 expected in 200 draws.
		if counts[k] < 10 {
			t.Errorf("%s drawn %d times in 200, want about 40", k, counts[k])
		}
	}
	for _, tc := range []struct {
		odds Odds
		want Kind
	}{{Odds{}, Pass}, {Odds{Fail: 1}, Fail}, {Odds{Partial: 1}, Partial}, {Odds{Slow: 1}, Slow}} {
		for i, k := range kinds(Random(1, tc.odds), 50) {
			if k != tc.want {
				t.Fatalf("odds %+v: draw %d = %s, want %s", tc.odds, i, k, tc.want)
			}
		}
	}
	if f := Random(1, Odds{Slow: 1, Delay: time.Minute})(OpApply); f.Delay != time.Minute {
		t.Errorf("Slow delay = %v, want the odds' 1m", f.Delay)
	}
}
