package syncer

import (
	"errors"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/switchyard-proxy/switchyard/dataplane"
)

// TestPartialSyncCarriesChangedNames checks the hint each Apply gets:
// none on a full sync, the names of the coalesced updates (carried and
// removed) on a partial one, none on the full sync that repairs a
// failure.
func TestPartialSyncCarriesChangedNames(t *testing.T) {
	h := newHarness(t, nil, false)
	if _, err := h.s.Apply(t.Context(), update("s1", svc("ns/a", "1"), svc("ns/b", "1"))); err != nil {
		t.Fatal(err)
	}
	// Two updates within the min sync period: one partial sync.
	errs := make(chan error, 2)
	go func() { _, err := h.s.Apply(t.Context(), update("s2", svc("ns/a", "2"))); errs <- err }()
	h.waitFor("first queued", func() bool { return h.s.queued.Load() == 2 })
	u := update("s3", svc("ns/c", "1"))
	u.Removed = []string{"ns/b"}
	go func() { _, err := h.s.Apply(t.Context(), u); errs <- err }()
	h.waitFor("second queued", func() bool { return h.s.queued.Load() == 3 })
	h.clk.Step(time.Second)
	for range 2 {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	boom := errors.New("boom")
	h.dp(dry).SetHook(func(string, *dataplane.State, dataplane.ApplyOptions) error { return boom })
	h.clk.Step(time.Second)
	if _, err := h.s.Apply(t.Context(), update("s4", svc("ns/a", "3"))); !errors.Is(err, boom) {
		t.Fatalf("Apply = %v, want %v", err, boom)
	}
	h.dp(dry).SetHook(nil)
	h.clk.Step(time.Second)
	if _, err := h.s.Apply(t.Context(), update("s5", svc("ns/d", "1"))); err != nil {
		t.Fatal(err)
	}
	var got []map[string]struct{}
	for _, c := range h.dp(dry).Calls() {
		got = append(got, c.Opts.Changed)
	}
	want := []map[string]struct{}{nil, {"ns/a": {}, "ns/b": {}, "ns/c": {}}, {"ns/a": {}}, nil}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("hints (-want +got):\n%s", diff)
	}
	if s := h.dp(dry).Applied(); s == nil || len(s.Services) != 3 {
		t.Errorf("applied = %v, want ns/a, ns/c, ns/d", s)
	}
}
