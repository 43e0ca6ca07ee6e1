package syncer

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/protobuf/testing/protocmp"

	"github.com/switchyard-proxy/switchyard/dataplane/dataplanetest"
	"github.com/switchyard-proxy/switchyard/nodeagent/internal/view"
	switchyardv1 "github.com/switchyard-proxy/switchyard/proto/switchyard/v1"
)

// The syncer's side of "faults on purpose": every test here runs the
// syncer against dataplanetest.Faulty in front of the Fake, which stands
// for the kernel.

const ipvs = switchyardv1.DataplaneMode_DATAPLANE_MODE_IPVS

// plan presets the fault plan of mode's dataplane, built at the mode's
// first sync.
func plan(mode switchyardv1.DataplaneMode, p dataplanetest.Plan) func(*harness, *Config) {
	return func(h *harness, _ *Config) { h.plans[mode] = p }
}

// recordCleanOthers logs CleanOthers calls into the harness's call log.
func recordCleanOthers(h *harness, c *Config) {
	c.CleanOthers = func(_ context.Context, keep switchyardv1.DataplaneMode) error {
		h.record("clean others, keep " + keep.String())
		return nil
	}
}

func removing(u *view.Update, names ...string) *view.Update {
	u.Removed = append(u.Removed, names...)
	return u
}

// kernelIsApplied fails the test unless the Fake holds exactly the
// syncer's applied view: what the agent announces to the control plane
// is what forwards.
func (h *harness) kernelIsApplied() {
	h.t.Helper()
	if diff := cmp.Diff(h.s.Applied().State(), h.dp(dry).Applied(), protocmp.Transform()); diff != "" {
		h.t.Errorf("kernel differs from the applied view (-applied +kernel):\n%s", diff)
	}
}

// TestSyncAfterAFailureIsFull: a failed commit, refused or half-way, is
// reported to its caller (a NACK) and leaves the applied view as it was;
// the next sync is full, as kube-proxy sets needFullSync after a failed
// sync, because what the kernel holds is no longer what the last Apply
// left; the one after is partial again.
func TestSyncAfterAFailureIsFull(t *testing.T) {
	for _, tc := range []struct {
		name  string
		fault dataplanetest.Fault
		// reached is the call log line of the failed commit, when it
		// reached the kernel.
		reached []string
	}{
		{"refused", dataplanetest.Fault{Kind: dataplanetest.Fail}, nil},
		{"half-way", dataplanetest.Fault{Kind: dataplanetest.Partial}, []string{"DATAPLANE_MODE_DRY_RUN apply full=false"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, nil, false, plan(dry, dataplanetest.Script(dataplanetest.Fault{}, tc.fault)))
			if _, err := h.s.Apply(t.Context(), update("s1", svc("ns/a", "1"), svc("ns/b", "1"))); err != nil {
				t.Fatal(err)
			}
			h.clk.Step(time.Second)
			_, err := h.s.Apply(t.Context(), removing(update("s2", svc("ns/a", "2"), svc("ns/c", "1")), "ns/b"))
			if !errors.Is(err, dataplanetest.ErrInjected) {
				t.Fatalf("Apply s2 = %v, want the injected fault", err)
			}
			if got := h.s.Applied().SystemVersion; got != "s1" {
				t.Errorf("SystemVersion after the failure = %q, want s1", got)
			}
			if diff := cmp.Diff(map[string]string{"ns/a": "1", "ns/b": "1"}, h.s.Versions()); diff != "" {
				t.Errorf("versions after the failure (-want +got):\n%s", diff)
			}
			for _, u := range []*view.Update{update("s3", svc("ns/d", "1")), update("s4", svc("ns/e", "1"))} {
				h.clk.Step(time.Second)
				if _, err := h.s.Apply(t.Context(), u); err != nil {
					t.Fatal(err)
				}
				h.kernelIsApplied()
			}
			want := append([]string{"DATAPLANE_MODE_DRY_RUN apply full=true"}, tc.reached...)
			want = append(want, "DATAPLANE_MODE_DRY_RUN apply full=true", "DATAPLANE_MODE_DRY_RUN apply full=false")
			h.wantCalls(t, want)
		})
	}
}

// TestSlowSyncLosesNothingThatArrivesMeanwhile: an update sent while a
// slow commit runs waits for it, and is coalesced with the next one into
// one sync after the min sync period; the kernel ends at the newest view.
func TestSlowSyncLosesNothingThatArrivesMeanwhile(t *testing.T) {
	release := make(chan struct{})
	slow := dataplanetest.Fault{Kind: dataplanetest.Slow, Release: release}
	h := newHarness(t, nil, false, plan(dry, dataplanetest.Script(dataplanetest.Fault{}, slow)))
	if _, err := h.s.Apply(t.Context(), update("s1", svc("ns/a", "1"), svc("ns/b", "1"))); err != nil {
		t.Fatal(err)
	}
	h.clk.Step(time.Second)
	errs := make(chan error, 3)
	apply := func(u *view.Update) {
		go func() { _, err := h.s.Apply(t.Context(), u); errs <- err }()
	}
	apply(update("s2", svc("ns/a", "2")))
	h.waitFor("the slow commit", func() bool { return h.faults(dry).Waiting() == 1 })
	apply(update("s3", svc("ns/a", "3"), svc("ns/c", "1"))) // arrives meanwhile
	if got := h.s.queued.Load(); got != 2 {
		t.Fatalf("queued = %d during the commit, want 2", got)
	}
	close(release)
	// s3 is taken once the commit returned, and waits for the min sync
	// period (its timer beside the full resync's) ...
	h.waitFor("s3 queued behind the min sync period", func() bool { return h.s.queued.Load() == 3 && h.clk.Waiters() == 2 })
	// ... with s4, which replaces its ns/a.
	apply(removing(update("s4", svc("ns/a", "4")), "ns/b"))
	h.waitFor("s4 queued", func() bool { return h.s.queued.Load() == 4 })
	h.clk.Step(time.Second)
	for range 3 {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	want := []string{
		"DATAPLANE_MODE_DRY_RUN apply full=true",
		"DATAPLANE_MODE_DRY_RUN apply full=false", // s2, slow
		"DATAPLANE_MODE_DRY_RUN apply full=false", // s3 and s4 as one
	}
	h.wantCalls(t, want)
	if diff := cmp.Diff(map[string]string{"ns/a": "4", "ns/c": "1"}, h.s.Versions()); diff != "" {
		t.Errorf("versions (-want +got):\n%s", diff)
	}
	if got := h.s.Applied().SystemVersion; got != "s4" {
		t.Errorf("SystemVersion = %q, want s4", got)
	}
	h.kernelIsApplied()
}

// TestShutdownCancelsASlowSync: canceling Run ends a commit that is
// stuck; its caller gets the cancellation (no ACK), nothing is saved
// for it, and the kernel keeps the last good state.
func TestShutdownCancelsASlowSync(t *testing.T) {
	never := make(chan struct{})
	slow := dataplanetest.Fault{Kind: dataplanetest.Slow, Release: never}
	h := newHarness(t, nil, false, plan(dry, dataplanetest.Script(dataplanetest.Fault{}, slow)), func(h *harness, c *Config) {
		c.Journal = &journal{h: h}
	})
	if _, err := h.s.Apply(t.Context(), update("s1", svc("ns/a", "1"))); err != nil {
		t.Fatal(err)
	}
	h.clk.Step(time.Second)
	errs := make(chan error, 1)
	go func() { _, err := h.s.Apply(t.Context(), update("s2", svc("ns/a", "2"))); errs <- err }()
	h.waitFor("the slow commit", func() bool { return h.faults(dry).Waiting() == 1 })
	stopped := make(chan struct{})
	go func() { h.stop(); close(stopped) }()
	select {
	case <-stopped:
	case <-time.After(timeout):
		t.Fatal("Run did not return while a commit was stuck")
	}
	if err := <-errs; !errors.Is(err, context.Canceled) {
		t.Errorf("Apply s2 = %v, want the cancellation", err)
	}
	want := []string{"intend s1 [ns/a]", "DATAPLANE_MODE_DRY_RUN apply full=true", "save s1", "intend s2 [ns/a]"}
	h.wantCalls(t, want)
	if in := h.faults(dry).Injections(); len(in) != 1 || !in[0].Canceled {
		t.Errorf("injections = %+v, want the slow commit canceled", in)
	}
	if got := h.s.Applied().SystemVersion; got != "s1" {
		t.Errorf("SystemVersion = %q, want s1", got)
	}
	h.kernelIsApplied()
}

// TestRepairSavesTheView: once a sync succeeds after a failed batch, the
// kernel holds exactly the applied view, and the journal is told so even
// when that sync carried no update (a resync): otherwise its record of
// the failed batch stays, and a restart restores and announces resources
// that the control plane never saw acknowledged and the kernel no longer
// holds.
func TestRepairSavesTheView(t *testing.T) {
	h := newHarness(t, nil, false, plan(dry, dataplanetest.Script(dataplanetest.Fault{}, dataplanetest.Fault{Kind: dataplanetest.Partial})),
		func(h *harness, c *Config) { c.Journal = &journal{h: h} })
	t0 := h.clk.Now()
	if _, err := h.s.Apply(t.Context(), update("s1", svc("ns/a", "1"))); err != nil {
		t.Fatal(err)
	}
	h.clk.Step(time.Second)
	if _, err := h.s.Apply(t.Context(), update("s2", svc("ns/a", "2"), svc("ns/b", "1"))); err == nil {
		t.Fatal("the half-way commit succeeded")
	}
	// Each resync is followed by an update: once that is answered, the
	// resync's own journal calls are all in the log.
	resync := func(at time.Duration, u *view.Update) {
		n := len(h.calls())
		h.clk.SetTime(t0.Add(at))
		// Under way, and its timer re-armed (the only waiter then): the
		// next resync is due at a known time.
		h.waitFor("full resync", func() bool { return len(h.calls()) > n && h.clk.Waiters() == 1 })
		if err := h.applyStepping(u); err != nil {
			t.Fatal(err)
		}
	}
	resync(30*time.Second, update("s3", svc("ns/c", "1")))
	resync(60*time.Second, update("s4", svc("ns/d", "1")))
	want := []string{
		"intend s1 [ns/a]", "DATAPLANE_MODE_DRY_RUN apply full=true", "save s1",
		"intend s2 [ns/a ns/b]", "DATAPLANE_MODE_DRY_RUN apply full=false", // half-way
		"DATAPLANE_MODE_DRY_RUN apply full=true", "save s1", // the resync repairs, and says so
		"intend s3 [ns/c]", "DATAPLANE_MODE_DRY_RUN apply full=false", "save s3",
		"DATAPLANE_MODE_DRY_RUN apply full=true", // nothing new to tell the journal
		"intend s4 [ns/d]", "DATAPLANE_MODE_DRY_RUN apply full=false", "save s4",
	}
	h.wantCalls(t, want)
	h.kernelIsApplied()
}

// TestModeSwitchFaults: a switch whose new mode commits half-way is a
// failure that leaves the old mode in use, and the new mode's half is
// removed (CleanOthers) after the next sync, so two modes never forward
// side by side; an old mode whose Cleanup fails does not fail the
// switch, and CleanOthers removes its rules.
func TestModeSwitchFaults(t *testing.T) {
	half := dataplanetest.Fault{Kind: dataplanetest.Partial, Changes: 99}
	tests := []struct {
		name     string
		mode     switchyardv1.DataplaneMode
		plan     dataplanetest.Plan
		wantErr  bool
		wantMode switchyardv1.DataplaneMode
		want     []string
	}{
		{
			name: "new mode half-way", mode: ipvs, plan: dataplanetest.Script(half), wantErr: true, wantMode: dry,
			want: []string{
				"DATAPLANE_MODE_DRY_RUN apply full=true", "clean others, keep DATAPLANE_MODE_DRY_RUN",
				"DATAPLANE_MODE_IPVS apply full=true", // committed, then failed
				"DATAPLANE_MODE_DRY_RUN apply full=true", "clean others, keep DATAPLANE_MODE_DRY_RUN",
				"DATAPLANE_MODE_DRY_RUN apply full=false",
			},
		},
		{
			name: "old mode's cleanup fails", mode: dry,
			plan:     dataplanetest.Script(dataplanetest.Fault{}, dataplanetest.Fault{Kind: dataplanetest.Fail}),
			wantMode: ipvs,
			want: []string{
				"DATAPLANE_MODE_DRY_RUN apply full=true", "clean others, keep DATAPLANE_MODE_DRY_RUN",
				"DATAPLANE_MODE_IPVS apply full=true", "clean others, keep DATAPLANE_MODE_IPVS",
				"DATAPLANE_MODE_IPVS apply full=false", "DATAPLANE_MODE_IPVS apply full=false",
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t, nil, false, plan(tt.mode, tt.plan), recordCleanOthers)
			if _, err := h.s.Apply(t.Context(), update("s1", svc("ns/a", "1"))); err != nil {
				t.Fatal(err)
			}
			h.clk.Step(time.Second)
			if _, err := h.s.Apply(t.Context(), update("s2", nodeConfig(ipvs), svc("ns/b", "1"))); (err != nil) != tt.wantErr {
				t.Fatalf("switch = %v, want error %t", err, tt.wantErr)
			}
			// s4 answered: every call of s3's sync, CleanOthers after its
			// answer included, is in the log.
			for _, u := range []*view.Update{update("s3", svc("ns/c", "1")), update("s4", svc("ns/d", "1"))} {
				h.clk.Step(time.Second)
				if _, err := h.s.Apply(t.Context(), u); err != nil {
					t.Fatal(err)
				}
			}
			h.wantCalls(t, tt.want)
			if got := h.s.Mode(); got != tt.wantMode {
				t.Errorf("Mode = %v, want %v", got, tt.wantMode)
			}
			if in := h.faults(tt.mode).Injections(); len(in) != 1 {
				t.Errorf("injections = %+v, want one", in)
			}
		})
	}
}

// TestRandomFaults drives seeded random faults through many updates and
// checks after each one what a node must keep whatever the kernel does:
// a failed update changes nothing the agent announces; a successful one
// leaves the kernel holding exactly the applied view, which is every
// successful update in order; the first sync after a failure is full.
func TestRandomFaults(t *testing.T) {
	odds := dataplanetest.Odds{Fail: 0.2, Partial: 0.2, Slow: 0.2, Delay: 300 * time.Millisecond}
	for _, seed := range []uint64{1, 2, 3} {
		t.Run(fmt.Sprint("seed ", seed), func(t *testing.T) {
			h := newHarness(t, nil, false, plan(dry, dataplanetest.Random(seed, odds)), func(_ *harness, c *Config) {
				c.SyncPeriod = 1000 * time.Hour          // no resync: the plan alone decides each call
				c.MinSyncPeriod = 100 * time.Millisecond // one step of applyStepping
			})
			rng := rand.New(rand.NewPCG(seed, 0))
			model := &view.View{Resources: map[string]*switchyardv1.Resource{}}
			afterFailure, kinds := false, map[dataplanetest.Kind]int{}
			for i := range 40 {
				u := update(fmt.Sprint("s", i))
				for range 1 + rng.IntN(3) {
					name := fmt.Sprint("ns/svc", rng.IntN(8))
					if rng.IntN(4) == 0 {
						u.Removed = append(u.Removed, name)
						continue
					}
					u.Resources[name] = svc(name, fmt.Sprint(i))
				}
				err := h.applyStepping(u)
				if err != nil {
					if !errors.Is(err, dataplanetest.ErrInjected) {
						t.Fatalf("update %d: %v, want an injected fault", i, err)
					}
					afterFailure = true
				} else {
					model = model.With(u)
					calls := h.dp(dry).Calls()
					if last := calls[len(calls)-1]; afterFailure && !last.Opts.Full {
						t.Errorf("update %d: the first sync after a failure was partial", i)
					}
					afterFailure = false
					h.kernelIsApplied()
				}
				if diff := cmp.Diff(model, h.s.Applied(), protocmp.Transform()); diff != "" {
					t.Fatalf("update %d (err %v): applied view (-want +got):\n%s", i, err, diff)
				}
			}
			for _, in := range h.faults(dry).Injections() {
				kinds[in.Fault.Kind]++
			}
			for _, k := range []dataplanetest.Kind{dataplanetest.Fail, dataplanetest.Partial, dataplanetest.Slow} {
				if kinds[k] == 0 {
					t.Errorf("seed %d injected no %s fault in 40 updates: pick another seed", seed, k)
				}
			}
		})
	}
}
