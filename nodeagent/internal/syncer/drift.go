package syncer

import (
	"context"
	"errors"
	"slices"
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/switchyard-proxy/switchyard/dataplane"
	switchyardv1 "github.com/switchyard-proxy/switchyard/proto/switchyard/v1"
)

// driftState is what the drift checks found; guarded by Syncer.mu.
type driftState struct {
	lastCheck, lastDrift time.Time
	detail               []string
	repairs              uint64
	err                  string
}

// errDriftUnsupported marks a mode without a drift check.
var errDriftUnsupported = errors.New("unsupported")

// checkDrift compares the kernel with what the active dataplane applied
// and, when they differ, repairs it with a full sync (which writes only
// what differs), taking pending updates along. It runs between syncs,
// from Run's loop, so it never races an Apply.
func (s *Syncer) checkDrift(ctx context.Context, pending []*request) (handled bool) {
	if !s.synced || s.holding.Load() {
		// Handed to kube-proxy: what changed in the kernel is its.
		return false
	}
	dc, ok := s.dp.(dataplane.DriftChecker)
	if !ok {
		s.setDrift(func(d *driftState) { d.err = errDriftUnsupported.Error() })
		return false
	}
	now := s.cfg.Clock.Now()
	found, err := dc.CheckDrift(ctx)
	mode := s.dp.Mode()
	s.cfg.Metrics.DriftChecked(mode, now, err == nil && found.Drifted())
	if err != nil {
		s.cfg.Logger.Warn("drift check failed", "mode", mode, "err", err)
		s.setDrift(func(d *driftState) { d.lastCheck, d.err = now, err.Error() })
		return false
	}
	s.setDrift(func(d *driftState) { d.lastCheck, d.err = now, "" })
	if !found.Drifted() {
		return false
	}
	if s.peerReturned(ctx) {
		// kube-proxy started and rewrote the rules it shares with this
		// agent: a repair would take them back from it (seen on the
		// real-cluster bed: the repair came 70 ms after kube-proxy's first
		// sync and kube-proxy did not rewrite them for minutes).
		return false
	}
	s.cfg.Logger.Warn("kernel state drifted from what was applied; repairing with a full sync",
		"mode", mode, "kinds", found.Kinds, "detail", found.Detail)
	s.setDrift(func(d *driftState) { d.lastDrift, d.detail = now, slices.Clone(found.Detail) })
	s.sync(ctx, pending, true)
	if s.repair {
		// The sync failed and logged why; the next check finds the drift
		// again, and the sync after a failure is full anyway.
		return true
	}
	for kind, n := range found.Kinds {
		s.cfg.Metrics.DriftRepaired(mode, kind, n)
	}
	s.setDrift(func(d *driftState) { d.repairs++ })
	s.cfg.Health.DriftRepaired(now)
	return true
}

func (s *Syncer) setDrift(f func(*driftState)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	f(&s.drift)
}

// Drift reports the drift checks as the agent's ACKs carry them.
func (s *Syncer) Drift() *switchyardv1.DriftStatus {
	s.mu.Lock()
	defer s.mu.Unlock()
	d := s.drift
	out := &switchyardv1.DriftStatus{LastDriftDetail: slices.Clone(d.detail), Repairs: d.repairs, Error: d.err}
	if s.cfg.DriftCheckInterval <= 0 {
		out.Error = "disabled"
	}
	if !d.lastCheck.IsZero() {
		out.LastCheck = timestamppb.New(d.lastCheck)
	}
	if !d.lastDrift.IsZero() {
		out.LastDrift = timestamppb.New(d.lastDrift)
	}
	return out
}
