package syncer

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"go.uber.org/goleak"
	"google.golang.org/protobuf/types/known/durationpb"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/switchyard-proxy/switchyard/dataplane"
	"github.com/switchyard-proxy/switchyard/dataplane/dataplanetest"
	"github.com/switchyard-proxy/switchyard/nodeagent/internal/runtest"
	"github.com/switchyard-proxy/switchyard/nodeagent/internal/view"
	switchyardv1 "github.com/switchyard-proxy/switchyard/proto/switchyard/v1"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

const timeout = 10 * time.Second

type harness struct {
	t   *testing.T
	clk *clocktesting.FakeClock
	s   *Syncer
	// stop cancels Run and waits for it; idempotent.
	stop func()

	mu  sync.Mutex
	dps map[switchyardv1.DataplaneMode]*dataplanetest.Fake
	// faulty wraps each Fake, with the plan of its mode in plans (set
	// by an option: a dataplane is built at its mode's first sync) or
	// none: every call passes.
	faulty map[switchyardv1.DataplaneMode]*dataplanetest.Faulty
	plans  map[switchyardv1.DataplaneMode]dataplanetest.Plan
	log    []string
}

func newHarness(t *testing.T, restored *view.View, reconcile bool, opts ...func(*harness, *Config)) *harness {
	t.Helper()
	h := &harness{t: t, clk: clocktesting.NewFakeClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)), dps: map[switchyardv1.DataplaneMode]*dataplanetest.Fake{},
		faulty: map[switchyardv1.DataplaneMode]*dataplanetest.Faulty{}, plans: map[switchyardv1.DataplaneMode]dataplanetest.Plan{}}
	cfg := Config{
		Logger:        slog.New(slog.NewTextHandler(t.Output(), nil)),
		Clock:         h.clk,
		MinSyncPeriod: time.Second,
		SyncPeriod:    30 * time.Second,
		Mode:          switchyardv1.DataplaneMode_DATAPLANE_MODE_DRY_RUN,
		NewDataplane:  h.newDataplane,
	}
	for _, o := range opts {
		o(h, &cfg)
	}
	s, err := New(cfg, restored, reconcile)
	if err != nil {
		t.Fatal(err)
	}
	h.s = s
	h.stop = runtest.Start(t, s.Run)
	return h
}

func (h *harness) newDataplane(mode switchyardv1.DataplaneMode) (dataplane.Dataplane, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if mode == switchyardv1.DataplaneMode_DATAPLANE_MODE_USERSPACE {
		return nil, errors.New("mode userspace is not available yet")
	}
	f := dataplanetest.New(mode.String())
	f.SetHook(func(op string, st *dataplane.State, opts dataplane.ApplyOptions) error {
		h.mu.Lock()
		defer h.mu.Unlock()
		h.log = append(h.log, fmt.Sprintf("%s %s full=%t", mode, op, opts.Full))
		return nil
	})
	h.dps[mode] = f
	h.faulty[mode] = dataplanetest.NewFaulty(f, h.plans[mode], dataplanetest.WithAfter(h.clk.After))
	return h.faulty[mode], nil
}

func (h *harness) dp(mode switchyardv1.DataplaneMode) *dataplanetest.Fake {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.dps[mode]
}

// faults returns the fault injector in front of mode's Fake.
func (h *harness) faults(mode switchyardv1.DataplaneMode) *dataplanetest.Faulty {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.faulty[mode]
}

func (h *harness) calls() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return slices.Clone(h.log)
}

func (h *harness) waitFor(what string, cond func() bool) {
	h.t.Helper()
	runtest.Eventually(h.t, what, cond)
}

// fire waits until the syncer armed its timers (armed names them) and
// moves the clock by d.
func (h *harness) fire(armed string, d time.Duration) {
	h.t.Helper()
	h.waitFor(armed, h.clk.HasWaiters)
	h.clk.Step(d)
}

// wantCalls fails t unless the dataplane and journal calls so far are
// want.
func (h *harness) wantCalls(t *testing.T, want []string) {
	t.Helper()
	if diff := cmp.Diff(want, h.calls()); diff != "" {
		t.Errorf("calls (-want +got):\n%s", diff)
	}
}

func svc(name, version string) *switchyardv1.Resource {
	return &switchyardv1.Resource{Name: name, Version: version, Body: &switchyardv1.Resource_Service{Service: &switchyardv1.ServiceView{
		ClusterIps: []string{"10.0.0." + version},
	}}}
}

func update(sysver string, rs ...*switchyardv1.Resource) *view.Update {
	u := &view.Update{SystemVersion: sysver, Resources: map[string]*switchyardv1.Resource{}}
	for _, r := range rs {
		u.Resources[r.GetName()] = r
	}
	return u
}

const dry = switchyardv1.DataplaneMode_DATAPLANE_MODE_DRY_RUN

func TestFirstSyncIsFullThenCoalesced(t *testing.T) {
	h := newHarness(t, nil, false)
	if _, err := h.s.Apply(t.Context(), update("s1", svc("ns/a", "1"))); err != nil {
		t.Fatal(err)
	}
	// Two updates within the min sync period: one partial sync, after it.
	errs := make(chan error, 2)
	go func() { _, err := h.s.Apply(t.Context(), update("s2", svc("ns/b", "1"))); errs <- err }()
	h.waitFor("first queued", func() bool { return h.s.queued.Load() == 2 })
	go func() { _, err := h.s.Apply(t.Context(), update("s3", svc("ns/c", "1"))); errs <- err }()
	h.waitFor("second queued", func() bool { return h.s.queued.Load() == 3 })
	if got := len(h.calls()); got != 1 {
		t.Fatalf("synced before the min sync period: %v", h.calls())
	}
	h.clk.Step(time.Second)
	for range 2 {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	want := []string{"DATAPLANE_MODE_DRY_RUN apply full=true", "DATAPLANE_MODE_DRY_RUN apply full=false"}
	h.wantCalls(t, want)
	if diff := cmp.Diff([]string{"ns/a", "ns/b", "ns/c"}, h.dp(dry).Services()); diff != "" {
		t.Errorf("applied (-want +got):\n%s", diff)
	}
	if got := h.s.Applied().SystemVersion; got != "s3" {
		t.Errorf("SystemVersion = %q, want s3", got)
	}
}

func TestPeriodicFullResync(t *testing.T) {
	h := newHarness(t, nil, false)
	if _, err := h.s.Apply(t.Context(), update("s1", svc("ns/a", "1"))); err != nil {
		t.Fatal(err)
	}
	h.fire("timers armed", 30*time.Second)
	h.waitFor("full resync", func() bool { return len(h.calls()) == 2 })
	want := []string{"DATAPLANE_MODE_DRY_RUN apply full=true", "DATAPLANE_MODE_DRY_RUN apply full=true"}
	h.wantCalls(t, want)
}

func TestFailedApplyKeepsLastGoodState(t *testing.T) {
	h := newHarness(t, nil, false)
	if _, err := h.s.Apply(t.Context(), update("s1", svc("ns/a", "1"))); err != nil {
		t.Fatal(err)
	}
	boom := errors.New("boom")
	h.dp(dry).SetHook(func(string, *dataplane.State, dataplane.ApplyOptions) error { return boom })
	h.clk.Step(time.Second)
	if _, err := h.s.Apply(t.Context(), update("s2", svc("ns/a", "2"), svc("ns/b", "1"))); !errors.Is(err, boom) {
		t.Fatalf("Apply error = %v, want %v", err, boom)
	}
	if diff := cmp.Diff(map[string]string{"ns/a": "1"}, h.s.Versions()); diff != "" {
		t.Errorf("versions (-want +got):\n%s", diff)
	}
	if got := h.s.Applied().SystemVersion; got != "s1" {
		t.Errorf("SystemVersion = %q, want s1", got)
	}
	h.dp(dry).SetHook(nil)
	h.clk.Step(time.Second)
	if _, err := h.s.Apply(t.Context(), update("s3", svc("ns/c", "1"))); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"ns/a", "ns/c"}, h.dp(dry).Services()); diff != "" {
		t.Errorf("applied (-want +got):\n%s", diff)
	}
}

func TestRestoredViewReconciledWithoutFlush(t *testing.T) {
	restored := &view.View{SystemVersion: "s9", Resources: map[string]*switchyardv1.Resource{"ns/a": svc("ns/a", "1")}}
	h := newHarness(t, restored, true)
	h.waitFor("reconcile", func() bool { return len(h.calls()) == 1 })
	h.wantCalls(t, []string{"DATAPLANE_MODE_DRY_RUN apply full=true"})
	if diff := cmp.Diff([]string{"ns/a"}, h.dp(dry).Services()); diff != "" {
		t.Errorf("applied (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(map[string]string{"ns/a": "1"}, h.s.Versions()); diff != "" {
		t.Errorf("versions (-want +got):\n%s", diff)
	}
}

func nodeConfig(mode switchyardv1.DataplaneMode) *switchyardv1.Resource {
	return &switchyardv1.Resource{Name: "node-a", Version: mode.String(), Body: &switchyardv1.Resource_NodeConfig{NodeConfig: &switchyardv1.NodeConfig{
		NodeName: "node-a", Mode: mode, Sync: &switchyardv1.SyncSettings{MinSyncPeriod: durationpb.New(time.Second)},
	}}}
}

func TestModeSwitch(t *testing.T) {
	h := newHarness(t, nil, false)
	if _, err := h.s.Apply(t.Context(), update("s1", svc("ns/a", "1"))); err != nil {
		t.Fatal(err)
	}
	h.clk.Step(time.Second)
	ipvs := switchyardv1.DataplaneMode_DATAPLANE_MODE_IPVS
	applied, err := h.s.Apply(t.Context(), update("s2", nodeConfig(ipvs)))
	if err != nil {
		t.Fatal(err)
	}
	if applied.Mode != ipvs {
		t.Errorf("Applied.Mode = %v, want the new mode (the ACK reports it)", applied.Mode)
	}
	want := []string{
		"DATAPLANE_MODE_DRY_RUN apply full=true",
		"DATAPLANE_MODE_IPVS apply full=true", // the new mode first
		"DATAPLANE_MODE_DRY_RUN cleanup full=false",
	}
	h.wantCalls(t, want)
	if diff := cmp.Diff([]string{"ns/a"}, h.dp(ipvs).Services()); diff != "" {
		t.Errorf("ipvs applied (-want +got):\n%s", diff)
	}
	if got := h.s.Mode(); got != ipvs {
		t.Errorf("Mode = %v, want %v", got, ipvs)
	}
	// A mode that is not available is a failed apply: previous mode kept.
	h.clk.Step(time.Second)
	if _, err := h.s.Apply(t.Context(), update("s3", nodeConfig(switchyardv1.DataplaneMode_DATAPLANE_MODE_USERSPACE))); err == nil {
		t.Fatal("switch to an unavailable mode succeeded")
	}
	if got := h.s.Applied().SystemVersion; got != "s2" {
		t.Errorf("SystemVersion = %q, want s2", got)
	}
}

func TestApplyAfterStop(t *testing.T) {
	s, err := New(Config{NewDataplane: func(switchyardv1.DataplaneMode) (dataplane.Dataplane, error) { return dataplanetest.New("x"), nil }}, nil, false)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if err := s.Run(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Apply(t.Context(), update("s1")); !errors.Is(err, ErrStopped) {
		t.Errorf("Apply after stop = %v, want ErrStopped", err)
	}
}
