package leftovers_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/switchyard-proxy/switchyard/dataplane"
	"github.com/switchyard-proxy/switchyard/dataplane/dataplanetest"
	"github.com/switchyard-proxy/switchyard/nodeagent/internal/leftovers"
	switchyardv1 "github.com/switchyard-proxy/switchyard/proto/switchyard/v1"
)

const (
	unspecified = switchyardv1.DataplaneMode_DATAPLANE_MODE_UNSPECIFIED
	iptables    = switchyardv1.DataplaneMode_DATAPLANE_MODE_IPTABLES
	nftables    = switchyardv1.DataplaneMode_DATAPLANE_MODE_NFTABLES
	ipvs        = switchyardv1.DataplaneMode_DATAPLANE_MODE_IPVS
	userspace   = switchyardv1.DataplaneMode_DATAPLANE_MODE_USERSPACE
	dryRun      = switchyardv1.DataplaneMode_DATAPLANE_MODE_DRY_RUN
)

// kernel is the node as the fakes see it: one dataplane per mode, some
// unavailable or failing.
type kernel struct {
	dps         map[switchyardv1.DataplaneMode]*dataplanetest.Fake
	unavailable map[switchyardv1.DataplaneMode]bool
	buildErr    map[switchyardv1.DataplaneMode]bool
}

func (k *kernel) build(m switchyardv1.DataplaneMode) (dataplane.Dataplane, error) {
	switch {
	case k.unavailable[m]:
		return nil, fmt.Errorf("%s mode: %w", m, dataplane.ErrUnavailable)
	case k.buildErr[m]:
		return nil, errors.New("netlink handle: permission denied")
	}
	if k.dps[m] == nil {
		k.dps[m] = dataplanetest.New(strings.ToLower(strings.TrimPrefix(m.String(), "DATAPLANE_MODE_")))
	}
	return k.dps[m], nil
}

// cleaned returns the modes whose Cleanup ran, in order of Modes.
func (k *kernel) cleaned() []switchyardv1.DataplaneMode {
	var out []switchyardv1.DataplaneMode
	for _, m := range []switchyardv1.DataplaneMode{iptables, nftables, ipvs, userspace, dryRun} {
		if dp := k.dps[m]; dp != nil && dp.Cleanups() > 0 {
			out = append(out, m)
		}
	}
	return out
}

func TestClean(t *testing.T) {
	boom := errors.New("iptables-nft-restore: exit status 4")
	tests := []struct {
		name        string
		keep        switchyardv1.DataplaneMode
		unavailable []switchyardv1.DataplaneMode
		buildErr    []switchyardv1.DataplaneMode
		failing     []switchyardv1.DataplaneMode
		wantCleaned []switchyardv1.DataplaneMode
		wantSkipped []switchyardv1.DataplaneMode
		wantErr     []string
	}{
		{name: "iptables in use", keep: iptables, wantCleaned: []switchyardv1.DataplaneMode{nftables, ipvs}},
		{name: "nftables in use", keep: nftables, wantCleaned: []switchyardv1.DataplaneMode{iptables, ipvs}},
		{name: "ipvs in use", keep: ipvs, wantCleaned: []switchyardv1.DataplaneMode{iptables, nftables}},
		{name: "userspace in use: every kernel mode", keep: userspace, wantCleaned: []switchyardv1.DataplaneMode{iptables, nftables, ipvs}},
		{name: "uninstall: every kernel mode", keep: unspecified, wantCleaned: []switchyardv1.DataplaneMode{iptables, nftables, ipvs}},
		{name: "dry-run touches nothing", keep: dryRun},
		{
			name: "no IPVS in the kernel: skipped, no error", keep: unspecified, unavailable: []switchyardv1.DataplaneMode{ipvs},
			wantCleaned: []switchyardv1.DataplaneMode{iptables, nftables}, wantSkipped: []switchyardv1.DataplaneMode{ipvs},
		},
		{
			name: "a failing mode does not stop the others", keep: unspecified, failing: []switchyardv1.DataplaneMode{iptables},
			wantCleaned: []switchyardv1.DataplaneMode{iptables, nftables, ipvs}, wantErr: []string{"clean up iptables mode", "exit status 4"},
		},
		{
			name: "a mode that cannot be built is an error", keep: iptables, buildErr: []switchyardv1.DataplaneMode{nftables},
			wantCleaned: []switchyardv1.DataplaneMode{ipvs}, wantErr: []string{"DATAPLANE_MODE_NFTABLES", "permission denied"},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			k := &kernel{dps: map[switchyardv1.DataplaneMode]*dataplanetest.Fake{}, unavailable: map[switchyardv1.DataplaneMode]bool{}, buildErr: map[switchyardv1.DataplaneMode]bool{}}
			for _, m := range tc.unavailable {
				k.unavailable[m] = true
			}
			for _, m := range tc.buildErr {
				k.buildErr[m] = true
			}
			for _, m := range tc.failing {
				dp, _ := k.build(m)
				dp.(*dataplanetest.Fake).SetHook(func(op string, _ *dataplane.State, _ dataplane.ApplyOptions) error {
					if op == "cleanup" {
						return boom
					}
					return nil
				})
			}
			c, err := leftovers.New(leftovers.Config{Build: k.build, Logger: slog.New(slog.NewTextHandler(t.Output(), nil))})
			if err != nil {
				t.Fatal(err)
			}
			out, err := c.Clean(t.Context(), tc.keep)
			if len(tc.wantErr) == 0 && err != nil {
				t.Fatalf("Clean: %v", err)
			}
			for _, w := range tc.wantErr {
				if err == nil || !strings.Contains(err.Error(), w) {
					t.Errorf("Clean error %v, want it to contain %q", err, w)
				}
			}
			if diff := cmp.Diff(tc.wantCleaned, k.cleaned()); diff != "" {
				t.Errorf("cleaned modes (-want +got):\n%s", diff)
			}
			var skipped []switchyardv1.DataplaneMode
			for _, o := range out {
				if o.Skipped != "" {
					skipped = append(skipped, o.Mode)
				}
				if o.Mode == tc.keep {
					t.Errorf("the mode in use, %s, has an outcome", o.Mode)
				}
			}
			if diff := cmp.Diff(tc.wantSkipped, skipped); diff != "" {
				t.Errorf("skipped modes (-want +got):\n%s", diff)
			}
			if tc.keep != dryRun && !slices.ContainsFunc(out, func(o leftovers.Outcome) bool { return o.Mode != tc.keep }) {
				t.Errorf("no outcome: %v", out)
			}
		})
	}
}

// draining is a Dataplane whose kernel carries connections of its own
// (dataplane.Drainer), as the ipvs mode's.
type draining struct {
	*dataplanetest.Fake
	conns int
}

func (d *draining) Connections(context.Context) (int, error) { return d.conns, nil }

// withDraining is a kernel whose ipvs mode carries 3 connections of its
// own, and the Build of the Cleaner over it.
func withDraining() (*kernel, *draining, func(switchyardv1.DataplaneMode) (dataplane.Dataplane, error)) {
	k := &kernel{dps: map[switchyardv1.DataplaneMode]*dataplanetest.Fake{}}
	ipvsDP := &draining{Fake: dataplanetest.New("ipvs"), conns: 3}
	return k, ipvsDP, func(m switchyardv1.DataplaneMode) (dataplane.Dataplane, error) {
		if m == ipvs {
			return ipvsDP, nil
		}
		return k.build(m)
	}
}

// TestCleanWaitsForDrain: a mode with connections of its own is kept
// (ErrDraining, no failure) until they are gone or MaxDrain passed since
// they were first seen; the other modes are cleaned meanwhile.
func TestCleanWaitsForDrain(t *testing.T) {
	k, ipvsDP, build := withDraining()
	now := time.Unix(1000, 0)
	c, err := leftovers.New(leftovers.Config{MaxDrain: time.Minute, Now: func() time.Time { return now }, Build: build})
	if err != nil {
		t.Fatal(err)
	}
	for _, step := range []struct {
		name      string
		advance   time.Duration
		conns     int
		wantDrain bool
		cleanups  int
	}{
		{name: "connections: kept", conns: 3, wantDrain: true},
		{name: "fewer, within the bound: kept", advance: 30 * time.Second, conns: 1, wantDrain: true},
		{name: "drained: removed", advance: time.Second, conns: 0, cleanups: 1},
		{name: "new connections: kept again", conns: 2, wantDrain: true, cleanups: 1},
		{name: "bound reached: removed anyway", advance: time.Minute, conns: 2, cleanups: 2},
	} {
		now = now.Add(step.advance)
		ipvsDP.conns = step.conns
		outs, err := c.Clean(t.Context(), nftables)
		if got := errors.Is(err, dataplane.ErrDraining); got != step.wantDrain {
			t.Fatalf("%s: ErrDraining %v, want %v (err %v)", step.name, got, step.wantDrain, err)
		}
		for _, o := range outs {
			if o.Err != nil {
				t.Fatalf("%s: %s failed: %v", step.name, o.Mode, o.Err)
			}
			if want := map[bool]int{true: step.conns}[step.wantDrain]; o.Mode == ipvs && o.Draining != want {
				t.Errorf("%s: Draining %d, want %d", step.name, o.Draining, want)
			}
		}
		if got := ipvsDP.Cleanups(); got != step.cleanups {
			t.Errorf("%s: ipvs cleaned up %d times, want %d", step.name, got, step.cleanups)
		}
		if k.dps[iptables].Cleanups() == 0 {
			t.Errorf("%s: iptables not cleaned while ipvs drains", step.name)
		}
	}
}

// TestCleanAtOnce: an uninstall (switchyard-agent --cleanup) removes a
// mode with connections of its own at once and says how many it cut.
func TestCleanAtOnce(t *testing.T) {
	_, ipvsDP, build := withDraining()
	c, err := leftovers.New(leftovers.Config{AtOnce: true, Build: build})
	if err != nil {
		t.Fatal(err)
	}
	outs, err := c.Clean(t.Context(), switchyardv1.DataplaneMode_DATAPLANE_MODE_UNSPECIFIED)
	if err != nil {
		t.Fatalf("Clean: %v (want no ErrDraining at once)", err)
	}
	for _, o := range outs {
		if o.Mode == ipvs && (o.Cut != 3 || o.Draining != 0) {
			t.Errorf("ipvs outcome %+v, want 3 cut and nothing draining", o)
		}
	}
	if got := ipvsDP.Cleanups(); got != 1 {
		t.Errorf("ipvs cleaned up %d times, want 1", got)
	}
}

// TestRetryChecksOnlyTheDrainingMode: while the ipvs mode drains, Retry
// reads and removes only it; the modes Clean removed are not built or
// removed again, and nothing is retried once the drain ended.
func TestRetryChecksOnlyTheDrainingMode(t *testing.T) {
	k, ipvsDP, build := withDraining()
	c, err := leftovers.New(leftovers.Config{Build: build})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Clean(t.Context(), nftables); !errors.Is(err, dataplane.ErrDraining) {
		t.Fatalf("Clean: %v, want ErrDraining", err)
	}
	for _, step := range []struct {
		conns     int
		wantModes []switchyardv1.DataplaneMode
		wantDrain bool
	}{
		{conns: 2, wantModes: []switchyardv1.DataplaneMode{ipvs}, wantDrain: true},
		{conns: 0, wantModes: []switchyardv1.DataplaneMode{ipvs}},
		{conns: 0}, // drained and removed: nothing left to retry
	} {
		ipvsDP.conns = step.conns
		outs, err := c.Retry(t.Context())
		var modes []switchyardv1.DataplaneMode
		for _, o := range outs {
			modes = append(modes, o.Mode)
		}
		if !slices.Equal(modes, step.wantModes) || errors.Is(err, dataplane.ErrDraining) != step.wantDrain {
			t.Errorf("%d connections: Retry checked %v (err %v), want %v, draining %v", step.conns, modes, err, step.wantModes, step.wantDrain)
		}
	}
	if got := k.dps[iptables].Cleanups(); got != 1 {
		t.Errorf("iptables cleaned up %d times, want once (by Clean)", got)
	}
	if got := ipvsDP.Cleanups(); got != 1 {
		t.Errorf("ipvs cleaned up %d times, want once (when drained)", got)
	}
}
