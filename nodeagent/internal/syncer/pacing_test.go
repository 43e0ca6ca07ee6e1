package syncer

import (
	"testing"
	"time"
)

func TestPacingGap(t *testing.T) {
	for _, tc := range []struct {
		pacing        Pacing
		minSync, cost time.Duration
		want          time.Duration
	}{
		{PacingBounded, time.Second, time.Millisecond, time.Second},
		{PacingBounded, 0, time.Second, 0},
		{PacingAdaptive, time.Second, time.Millisecond, 4 * time.Millisecond}, // nftables partial sync: at once
		{PacingAdaptive, time.Second, 50 * time.Millisecond, 200 * time.Millisecond},
		{PacingAdaptive, time.Second, 3 * time.Second, time.Second}, // a slow restore: kube-proxy's bound
		{PacingAdaptive, 0, time.Second, 0},                         // no minimum
		{PacingAdaptive, time.Second, 0, 0},
	} {
		if got := tc.pacing.gap(tc.minSync, tc.cost); got != tc.want {
			t.Errorf("%v.gap(%v, %v) = %v, want %v", tc.pacing, tc.minSync, tc.cost, got, tc.want)
		}
	}
}

func TestParsePacing(t *testing.T) {
	for _, p := range []Pacing{PacingBounded, PacingAdaptive} {
		if got, err := ParsePacing(p.String()); err != nil || got != p {
			t.Errorf("ParsePacing(%q) = %v, %v", p, got, err)
		}
	}
	if _, err := ParsePacing("fast"); err == nil {
		t.Error("ParsePacing took fast")
	}
}

// TestPacingSpacesSyncs: a change right after a sync that cost nothing
// (the fake clock does not move while it programs) is applied at once
// under adaptive pacing, and waits out MinSyncPeriod under bounded
// pacing, kube-proxy's.
func TestPacingSpacesSyncs(t *testing.T) {
	for _, pacing := range []Pacing{PacingAdaptive, PacingBounded} {
		t.Run(pacing.String(), func(t *testing.T) {
			h := newHarness(t, nil, false, func(_ *harness, c *Config) { c.Pacing = pacing })
			if _, err := h.s.Apply(t.Context(), update("s1", svc("ns/a", "1"))); err != nil {
				t.Fatal(err)
			}
			done := make(chan error, 1)
			go func() {
				_, err := h.s.Apply(t.Context(), update("s2", svc("ns/a", "2")))
				done <- err
			}()
			if pacing == PacingBounded {
				select {
				case err := <-done:
					t.Fatalf("bounded: the second update applied within MinSyncPeriod (err %v)", err)
				case <-time.After(50 * time.Millisecond):
				}
				h.fire("the min-sync timer", time.Second)
			}
			if err := <-done; err != nil {
				t.Fatal(err)
			}
			h.wantCalls(t, []string{"DATAPLANE_MODE_DRY_RUN apply full=true", "DATAPLANE_MODE_DRY_RUN apply full=false"})
		})
	}
}
