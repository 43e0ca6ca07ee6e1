package syncer

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/switchyard-proxy/switchyard/dataplane"
	"github.com/switchyard-proxy/switchyard/nodeagent/internal/view"
	switchyardv1 "github.com/switchyard-proxy/switchyard/proto/switchyard/v1"
)

// TestCleanOthers: the other modes' leftovers are removed after the first
// successful sync of a mode (at start and after a switch), never before
// and never again once done; a failure is retried after a full sync only.
func TestCleanOthers(t *testing.T) {
	ipvs := switchyardv1.DataplaneMode_DATAPLANE_MODE_IPVS
	restored := &view.View{SystemVersion: "s0", Resources: map[string]*switchyardv1.Resource{"ns/a": svc("ns/a", "1")}}
	tests := []struct {
		name string
		// restored, when set, is reconciled at start.
		restored *view.View
		// fail makes the first n CleanOthers calls fail.
		fail int
		// failApply fails every Apply of the dataplanes.
		failApply bool
		// steps drive the syncer after start; each is an update, or a
		// full resync when nil (at most one: the clock is stepped while
		// applying, so the resync timer's phase is not known after it).
		steps []*view.Update
		want  []string
	}{
		{
			name:     "restart with a restored view: after its reconcile",
			restored: restored,
			steps:    []*view.Update{update("s1", svc("ns/b", "2"))},
			want: []string{
				"DATAPLANE_MODE_DRY_RUN apply full=true", "clean others, keep DATAPLANE_MODE_DRY_RUN",
				"DATAPLANE_MODE_DRY_RUN apply full=false",
			},
		},
		{
			name:  "fresh start: after the first view",
			steps: []*view.Update{update("s1", svc("ns/a", "1")), update("s2", svc("ns/b", "2"))},
			want: []string{
				"DATAPLANE_MODE_DRY_RUN apply full=true", "clean others, keep DATAPLANE_MODE_DRY_RUN",
				"DATAPLANE_MODE_DRY_RUN apply full=false",
			},
		},
		{
			name:  "runtime switch: the new mode first, then the old one and every other",
			steps: []*view.Update{update("s1", svc("ns/a", "1")), update("s2", nodeConfig(ipvs))},
			want: []string{
				"DATAPLANE_MODE_DRY_RUN apply full=true", "clean others, keep DATAPLANE_MODE_DRY_RUN",
				"DATAPLANE_MODE_IPVS apply full=true", "DATAPLANE_MODE_DRY_RUN cleanup full=false", "clean others, keep DATAPLANE_MODE_IPVS",
			},
		},
		{
			name:  "a failure is retried after the next full sync, not after partial ones",
			fail:  1,
			steps: []*view.Update{update("s1", svc("ns/a", "1")), update("s2", svc("ns/b", "2")), nil, update("s3", svc("ns/c", "3"))},
			want: []string{
				"DATAPLANE_MODE_DRY_RUN apply full=true", "clean others, keep DATAPLANE_MODE_DRY_RUN (fails)",
				"DATAPLANE_MODE_DRY_RUN apply full=false",
				"DATAPLANE_MODE_DRY_RUN apply full=true", "clean others, keep DATAPLANE_MODE_DRY_RUN",
				"DATAPLANE_MODE_DRY_RUN apply full=false",
			},
		},
		{
			name:      "never while the new mode has not applied",
			restored:  restored,
			failApply: true,
			steps:     []*view.Update{update("s1", svc("ns/b", "2"))},
			want:      []string{"DATAPLANE_MODE_DRY_RUN apply full=true", "DATAPLANE_MODE_DRY_RUN apply full=true"},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			calls := 0
			h := newHarness(t, tc.restored, tc.restored != nil, func(h *harness, c *Config) {
				c.CleanOthers = func(_ context.Context, keep switchyardv1.DataplaneMode) error {
					calls++
					h.mu.Lock()
					defer h.mu.Unlock()
					if calls <= tc.fail {
						h.log = append(h.log, "clean others, keep "+keep.String()+" (fails)")
						return errors.New("iptables-nft-restore: exit status 4")
					}
					h.log = append(h.log, "clean others, keep "+keep.String())
					return nil
				}
				if tc.failApply {
					build := c.NewDataplane
					c.NewDataplane = func(m switchyardv1.DataplaneMode) (dataplane.Dataplane, error) {
						dp, err := build(m)
						h.dp(m).SetHook(func(string, *dataplane.State, dataplane.ApplyOptions) error {
							h.mu.Lock()
							defer h.mu.Unlock()
							h.log = append(h.log, m.String()+" apply full=true")
							return errors.New("restore failed")
						})
						return dp, err
					}
				}
			})
			if tc.restored != nil {
				h.waitFor("reconcile", func() bool { return len(h.calls()) > 0 })
			}
			for _, u := range tc.steps {
				if u == nil {
					n := len(h.calls())
					h.clk.Step(30 * time.Second) // the sync period
					h.waitFor("full resync", func() bool { return len(h.calls()) > n })
					continue
				}
				if err := h.applyStepping(u); (err != nil) != tc.failApply {
					t.Fatalf("Apply: %v", err)
				}
			}
			// A clean-up runs after the ACK is answered: wait for it.
			h.waitFor("the calls", func() bool { return len(h.calls()) >= len(tc.want) })
			h.wantCalls(t, tc.want)
		})
	}
}

// applyStepping applies u while stepping the fake clock past the min sync
// period, however far the last sync's timestamp is ahead.
func (h *harness) applyStepping(u *view.Update) error {
	done := make(chan error, 1)
	go func() {
		_, err := h.s.Apply(h.t.Context(), u)
		done <- err
	}()
	for {
		select {
		case err := <-done:
			return err
		case <-time.After(time.Millisecond): // poll: the syncer waits on the fake clock
			h.clk.Step(100 * time.Millisecond)
		}
	}
}

// drainingDP is a dataplane whose kernel carries connections of its own
// (dataplane.Drainer), as the ipvs mode's.
type drainingDP struct {
	dataplane.Dataplane
	conns *atomic.Int64
}

func (d drainingDP) Connections(context.Context) (int, error) { return int(d.conns.Load()), nil }

// TestModeSwitchDrainsTheOldMode: switching away from a mode with
// connections of its own (IPVS) applies the new mode and leaves the old
// one in place (no Cleanup) for the leftover cleanup, which keeps it
// while they last (ErrDraining) and is retried every
// drainRetryInterval, not at the next full sync, until it can go. The
// retry checks only the draining mode (RetryDrain) when there is one,
// else it cleans the other modes again.
func TestModeSwitchDrainsTheOldMode(t *testing.T) {
	for _, retry := range []bool{true, false} {
		t.Run(fmt.Sprintf("RetryDrain=%v", retry), func(t *testing.T) { modeSwitchDrains(t, retry) })
	}
}

func modeSwitchDrains(t *testing.T, withRetry bool) {
	ipvs := switchyardv1.DataplaneMode_DATAPLANE_MODE_IPVS
	nft := switchyardv1.DataplaneMode_DATAPLANE_MODE_NFTABLES
	var conns atomic.Int64
	conns.Store(20)
	h := newHarness(t, nil, false, func(h *harness, c *Config) {
		c.Mode = ipvs
		c.SyncPeriod = time.Hour // no full resync cleans up meanwhile
		build := c.NewDataplane
		c.NewDataplane = func(m switchyardv1.DataplaneMode) (dataplane.Dataplane, error) {
			dp, err := build(m)
			if m == ipvs && err == nil {
				return drainingDP{Dataplane: dp, conns: &conns}, nil
			}
			return dp, err
		}
		clean := func(what string, draining bool) error {
			h.mu.Lock()
			defer h.mu.Unlock()
			if draining && conns.Load() > 0 {
				h.log = append(h.log, what+" (ipvs draining)")
				return fmt.Errorf("ipvs mode kept for %d connections: %w", conns.Load(), dataplane.ErrDraining)
			}
			h.log = append(h.log, what)
			return nil
		}
		c.CleanOthers = func(_ context.Context, keep switchyardv1.DataplaneMode) error {
			return clean("clean others, keep "+keep.String(), keep != ipvs)
		}
		if withRetry {
			c.RetryDrain = func(context.Context) error { return clean("retry the drain", true) }
		}
	})
	if err := h.applyStepping(update("s1", svc("ns/a", "1"))); err != nil {
		t.Fatal(err)
	}
	if err := h.applyStepping(update("s2", nodeConfig(nft))); err != nil {
		t.Fatal(err)
	}
	want := []string{
		"DATAPLANE_MODE_IPVS apply full=true", "clean others, keep DATAPLANE_MODE_IPVS",
		"DATAPLANE_MODE_NFTABLES apply full=true", "clean others, keep DATAPLANE_MODE_NFTABLES (ipvs draining)",
	}
	h.waitFor("the first cleanup", func() bool { return len(h.calls()) >= len(want) })
	h.wantCalls(t, want)
	// The retry timer is armed after the sync returns: step the clock
	// by one interval at a time until the retry shows.
	stepUntil := func(n int) {
		for len(h.calls()) < n {
			h.clk.Step(drainRetryInterval)
			time.Sleep(time.Millisecond)
		}
	}
	retried := "clean others, keep DATAPLANE_MODE_NFTABLES"
	if withRetry {
		retried = "retry the drain"
	}
	want = append(want, retried+" (ipvs draining)")
	stepUntil(len(want))
	h.wantCalls(t, want)
	conns.Store(0)
	want = append(want, retried)
	stepUntil(len(want))
	h.wantCalls(t, want)
	// Done: no more retries.
	h.clk.Step(10 * drainRetryInterval)
	time.Sleep(50 * time.Millisecond)
	h.wantCalls(t, want)
}
