package syncer

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/switchyard-proxy/switchyard/dataplane"
	switchyardv1 "github.com/switchyard-proxy/switchyard/proto/switchyard/v1"
)

// drifting is a dataplane whose drift check reports what the test says,
// once.
type drifting struct {
	dataplane.Dataplane
	mu     sync.Mutex
	next   dataplane.Drift
	checks int
}

func (d *drifting) CheckDrift(context.Context) (dataplane.Drift, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.checks++
	out := d.next
	d.next = dataplane.Drift{}
	return out, nil
}

func (d *drifting) set(dr dataplane.Drift) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.next = dr
}

func (d *drifting) count() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.checks
}

func withDrift(interval time.Duration, wrap bool, got **drifting) func(*harness, *Config) {
	return func(h *harness, c *Config) {
		c.DriftCheckInterval = interval
		if !wrap {
			return
		}
		c.NewDataplane = func(mode switchyardv1.DataplaneMode) (dataplane.Dataplane, error) {
			dp, err := h.newDataplane(mode)
			*got = &drifting{Dataplane: dp}
			return *got, err
		}
	}
}

// TestDriftRepairedByAFullSync: a clean check changes nothing; a check
// that finds a chain missing makes a full sync at once, and the status
// the ACKs carry says when and what.
func TestDriftRepairedByAFullSync(t *testing.T) {
	var dp *drifting
	h := newHarness(t, nil, false, withDrift(5*time.Second, true, &dp))
	if _, err := h.s.Apply(t.Context(), update("s1", svc("ns/a", "1"))); err != nil {
		t.Fatal(err)
	}
	h.fire("timers armed", 5*time.Second)
	h.waitFor("a clean check", func() bool { return dp.count() == 1 })
	if st := h.s.Drift(); st.GetLastCheck() == nil || st.GetRepairs() != 0 || st.GetLastDrift() != nil {
		t.Errorf("after a clean check: %v", st)
	}

	var found dataplane.Drift
	found.Add(dataplane.DriftChain, "KUBE-SVC-X")
	dp.set(found)
	h.fire("drift timer re-armed", 5*time.Second)
	h.waitFor("the repair", func() bool { return len(h.calls()) == 2 })
	want := []string{"DATAPLANE_MODE_DRY_RUN apply full=true", "DATAPLANE_MODE_DRY_RUN apply full=true"}
	h.wantCalls(t, want)
	h.waitFor("repair counted", func() bool { return h.s.Drift().GetRepairs() == 1 })
	st := h.s.Drift()
	if d := cmp.Diff([]string{"chain KUBE-SVC-X"}, st.GetLastDriftDetail()); d != "" || st.GetLastDrift() == nil || st.GetError() != "" {
		t.Errorf("status after the repair: %v (detail -want +got %s)", st, d)
	}
	if got := h.s.Versions(); got["ns/a"] != "1" {
		t.Errorf("the repair lost the applied view: %v", got)
	}
}

func TestDriftUnsupportedAndDisabled(t *testing.T) {
	h := newHarness(t, nil, false, withDrift(5*time.Second, false, nil))
	if _, err := h.s.Apply(t.Context(), update("s1", svc("ns/a", "1"))); err != nil {
		t.Fatal(err)
	}
	h.fire("timers armed", 5*time.Second)
	h.waitFor("unsupported reported", func() bool { return h.s.Drift().GetError() == "unsupported" })
	if n := len(h.calls()); n != 1 {
		t.Errorf("%d applies, want only the first", n)
	}

	off := newHarness(t, nil, false)
	if got := off.s.Drift().GetError(); got != "disabled" {
		t.Errorf("without an interval: error %q, want disabled", got)
	}
}
