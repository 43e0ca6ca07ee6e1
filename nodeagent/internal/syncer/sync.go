package syncer

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"runtime/debug"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/switchyard-proxy/switchyard/dataplane"
	"github.com/switchyard-proxy/switchyard/nodeagent/internal/view"
	switchyardv1 "github.com/switchyard-proxy/switchyard/proto/switchyard/v1"
)

// sync programs the applied view with the pending updates merged in, and
// answers every pending request. full forces ApplyOptions.Full; the first
// sync of a Syncer is always full.
func (s *Syncer) sync(ctx context.Context, pending []*request, full bool) {
	// ProgramSeq is odd from here until the kernel and Applied agree
	// again: the sync recorded what it applied, or failed.
	s.progSeq.Add(1)
	settled := false
	settle := func() {
		if !settled {
			settled = true
			s.progSeq.Add(1)
		}
	}
	defer settle()
	prev := s.Applied()
	updates := make([]*view.Update, len(pending))
	for i, p := range pending {
		updates[i] = p.u
	}
	next, nextState := prev.WithState(s.state, updates...)
	if s.cfg.Links != nil {
		nextState.Links = s.cfg.Links()
	}
	s.intend(pending)
	full = full || !s.synced || s.repair
	names := view.Changed(updates...)
	var changed map[string]struct{}
	if !full {
		// Exact: the dataplane's last successful Apply was of prev (a
		// failed one makes this sync full, a switch a new dataplane).
		changed = names
	}
	hint := s.decorate(nextState, changed)
	start := s.cfg.Clock.Now()
	var switched bool
	var err error
	if !s.holding.Load() {
		// Handed to kube-proxy (handover.go): the view is followed, the
		// kernel is its.
		switched, err = s.program(ctx, nextState, full, hint)
	}
	end := s.cfg.Clock.Now()
	s.lastSync, s.lastCost = end, end.Sub(start)
	if err != nil {
		s.repair = true
		s.cfg.Metrics.SyncFailed()
		if len(pending) == 0 {
			// No caller gets this error back (resync, reconcile): log it.
			s.cfg.Logger.Warn("sync failed; last good state kept", "full", full, "systemVersion", next.SystemVersion, "err", err)
		}
		for _, p := range pending {
			p.result <- result{err: err}
		}
		return
	}
	s.synced = true
	s.everSynced.Store(true)
	repaired := s.repair
	s.repair = false
	s.mu.Lock()
	s.applied, s.config = next, nextState.Config
	s.mu.Unlock()
	settle()
	s.state = nextState
	d := end.Sub(start)
	s.cfg.Metrics.Synced(full, d, end, next.SystemVersion, len(next.Resources))
	if st, ok := s.dp.(interface{ LastSync() dataplane.SyncStats }); ok {
		fs := st.LastSync()
		s.cfg.Metrics.Flowtable(fs.FlowtableSkipped, fs.FlowtableDevices, fs.FlowtableErrors)
	}
	s.cfg.Health.Updated()
	s.cfg.Logger.Debug("synced", "full", full, "systemVersion", next.SystemVersion, "resources", len(next.Resources), "duration", d)
	// After a failure the kernel holds exactly next again: a record of
	// the failed batch must not outlive it, or a restart would restore
	// and announce what was never applied.
	if s.cfg.Journal != nil && (len(pending) > 0 || repaired) {
		// next differs from the last saved view (prev: a failed sync
		// saves nothing) by the batch's names.
		if err := s.cfg.Journal.Save(next, names); err != nil {
			// The kernel is programmed; the batch's intent still covers
			// it, so a restart restores the older view plus this batch.
			s.cfg.Metrics.StateWriteFailed()
			s.cfg.Logger.Error("persisting the applied view failed", "err", err)
		}
	}
	if s.cfg.OnApplied != nil && !s.holding.Load() {
		s.cfg.OnApplied(next, changed)
	}
	s.observe(prev, updates, end)
	for _, p := range pending {
		p.result <- result{applied: s.report(p.u, d, end)}
	}
	s.adoptPeer(ctx)
	if (switched || full) && !s.holding.Load() {
		s.cleanOthers(ctx)
		// After the ACK: a forced collection at 10k services takes tens
		// of milliseconds, which the sync and its report need not wait for.
		releaseMemory()
	}
}

// decorate lets the Decorator put the agent's own services into st and
// returns the hint for Apply: changed, plus each name the Decorator owns
// whose service differs from the one in s.state, the state of the
// dataplane's last successful Apply. changed itself is left alone: it is
// the view's, for the journal and OnApplied.
func (s *Syncer) decorate(st *dataplane.State, changed map[string]struct{}) map[string]struct{} {
	if s.cfg.Decorator == nil {
		return changed
	}
	owned := s.cfg.Decorator.Decorate(st, changed)
	if changed == nil {
		return nil
	}
	hint, copied := changed, false
	for _, name := range owned {
		if _, ok := hint[name]; ok {
			continue
		}
		was, had := s.state.Services[name]
		now, has := st.Services[name]
		if had == has && (was == now || proto.Equal(was, now)) {
			continue
		}
		if !copied {
			hint, copied = maps.Clone(changed), true
		}
		hint[name] = struct{}{}
	}
	return hint
}

// intend records the pending updates, merged, before their commit, so
// that a crash after the commit cannot restore a view older than the
// kernel's. A failure is logged and the commit goes on: the journal then
// holds no view to restore (or says why it still does), and forwarding
// matters more than a restart's shortcut.
func (s *Syncer) intend(pending []*request) {
	if s.cfg.Journal == nil || len(pending) == 0 {
		return
	}
	var batch *view.Update
	for _, p := range pending {
		batch = view.Merge(batch, p.u)
	}
	if err := s.cfg.Journal.Intend(batch); err != nil {
		s.cfg.Metrics.StateWriteFailed()
		s.cfg.Logger.Error("recording the update before its commit failed", "systemVersion", batch.SystemVersion, "err", err)
	}
}

// cleanOthers removes the other modes' leftovers when a switch (or the
// start) left them. A failure is logged: the mode in use forwards, and the
// next full sync retries.
func (s *Syncer) cleanOthers(ctx context.Context) {
	if !s.othersLeft || s.cfg.CleanOthers == nil {
		return
	}
	err := s.cfg.CleanOthers(ctx, s.mode)
	// A mode kept for its connections (IPVS) is retried soon, not at the
	// next full sync: it must go once they drain.
	s.drainRetry = errors.Is(err, dataplane.ErrDraining)
	if err != nil {
		if !onlyDraining(err) {
			s.cfg.Logger.Error("removing other modes' rules failed; retried after the next full sync", "mode", s.dp.Mode(), "err", err)
		}
		return
	}
	s.othersLeft = false
	s.cfg.Logger.Info("other modes' rules removed", "mode", s.dp.Mode())
}

// report is the ACK's account of u's apply, which ended at end after d.
func (s *Syncer) report(u *view.Update, d time.Duration, end time.Time) view.Applied {
	a := view.Applied{Duration: d, Mode: s.mode}
	if times := u.TriggerTimes(s.started, end); len(times) > 0 {
		a.ProgrammingLatency, a.HasLatency = end.Sub(times[0]), true
	}
	return a
}

// observe records the changes of each update against the view before it
// (prev, then prev with the updates before it) and their latencies.
func (s *Syncer) observe(prev *view.View, us []*view.Update, end time.Time) {
	// since holds what the updates before the current one changed (nil:
	// removed), so that no intermediate view is built.
	since := map[string]*switchyardv1.Resource{}
	old := func(name string) *switchyardv1.ServiceView {
		if r, ok := since[name]; ok {
			return r.GetService()
		}
		return prev.Resources[name].GetService()
	}
	for _, u := range us {
		services, endpoints := 0, 0
		for name, r := range u.Resources {
			sv := r.GetService()
			if sv == nil {
				continue
			}
			services++
			if !sameEndpoints(old(name), sv) {
				endpoints++
			}
		}
		for _, name := range u.Removed {
			if o := old(name); o != nil {
				services++
				if len(o.GetClusterEndpoints())+len(o.GetLocalEndpoints()) > 0 {
					endpoints++
				}
			}
		}
		s.cfg.Metrics.Changes(services, endpoints)
		for _, t := range u.TriggerTimes(s.started, end) {
			s.cfg.Metrics.ProgrammingLatency(end.Sub(t))
		}
		for _, name := range u.Removed {
			since[name] = nil
		}
		maps.Copy(since, u.Resources)
	}
}

func sameEndpoints(a, b *switchyardv1.ServiceView) bool {
	eq := func(x, y []*switchyardv1.Endpoint) bool {
		if len(x) != len(y) {
			return false
		}
		for i := range x {
			if !proto.Equal(x[i], y[i]) {
				return false
			}
		}
		return true
	}
	return eq(a.GetClusterEndpoints(), b.GetClusterEndpoints()) && eq(a.GetLocalEndpoints(), b.GetLocalEndpoints())
}

// program applies st through the dataplane its mode selects, switching
// modes when it changed (or on the first sync): the new mode first, then
// Cleanup of the old one. changed is the hint of a partial sync. switched
// reports a new mode in use, whose first sync it was.
func (s *Syncer) program(ctx context.Context, st *dataplane.State, full bool, changed map[string]struct{}) (switched bool, err error) {
	mode := s.cfg.Mode
	if m := st.Config.GetMode(); m != switchyardv1.DataplaneMode_DATAPLANE_MODE_UNSPECIFIED {
		mode = m
	}
	if s.dp != nil && mode == s.mode {
		if err := s.dp.Apply(ctx, st, dataplane.ApplyOptions{Full: full, Changed: changed}); err != nil {
			return false, fmt.Errorf("apply %s: %w", s.dp.Mode(), err)
		}
		return false, nil
	}
	dp, err := s.cfg.NewDataplane(mode)
	if err != nil {
		return false, fmt.Errorf("dataplane for mode %s: %w", mode, err)
	}
	if err := dp.Apply(ctx, st, dataplane.ApplyOptions{Full: true}); err != nil {
		if s.dp != nil {
			// A switch that got half-way leaves part of the new mode
			// forwarding beside the old one: removed with the other
			// modes' leftovers after the next (full) sync.
			s.othersLeft = true
		}
		return false, fmt.Errorf("apply %s: %w", dp.Mode(), err)
	}
	old := s.dp
	s.dp = dp
	s.othersLeft = true
	s.mu.Lock()
	s.mode = mode
	s.mu.Unlock()
	if old == nil {
		return true, nil
	}
	s.cfg.Metrics.ModeSwitched()
	s.cfg.Logger.Info("dataplane mode switched", "from", old.Mode(), "to", dp.Mode())
	if dr, ok := old.(dataplane.Drainer); ok && s.cfg.CleanOthers != nil {
		// Its connections are its own (IPVS): they would break with it.
		// The new mode already takes new connections; the leftover
		// cleanup after this sync removes the old one once they drain.
		if n, err := dr.Connections(ctx); err != nil || n > 0 {
			return true, nil
		}
	}
	if err := old.Cleanup(ctx); err != nil {
		// The new mode forwards; leftovers of the old one are logged, not
		// a failure of this sync.
		s.cfg.Logger.Error("cleaning up the previous dataplane failed", "mode", old.Mode(), "err", err)
	}
	return true, nil
}

// releaseMemory returns the garbage of a full sync to the OS at once. A
// full sync renders and reads back every service (tens of MB at 10k
// services) and happens at start and hourly; the runtime's scavenger
// would keep those pages resident for minutes, and a node agent's
// resident memory is what every node pays.
func releaseMemory() { debug.FreeOSMemory() }

// retryDrain checks the modes kept for their connections again (see
// Config.RetryDrain). The other modes' leftovers, removed by the
// CleanOthers that started the drain or failing there, are not touched:
// a failure among them is retried after the next full sync.
func (s *Syncer) retryDrain(ctx context.Context) {
	if s.cfg.RetryDrain == nil {
		s.cleanOthers(ctx)
		return
	}
	err := s.cfg.RetryDrain(ctx)
	s.drainRetry = errors.Is(err, dataplane.ErrDraining)
	if err != nil && !onlyDraining(err) {
		s.cfg.Logger.Error("removing a mode kept for its connections failed; retried after the next full sync", "mode", s.dp.Mode(), "err", err)
	}
}

// drainRetryInterval is how often a mode kept for its connections is
// checked again: IPVS counts a closed connection for its TIME_WAIT (two
// minutes by default), so a few seconds add nothing noticeable.
const drainRetryInterval = 5 * time.Second

// onlyDraining reports whether every error joined in err is a mode kept
// for its connections (dataplane.ErrDraining), which the cleaner logs
// itself, and no failure.
func onlyDraining(err error) bool {
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		for _, e := range j.Unwrap() {
			if !onlyDraining(e) {
				return false
			}
		}
		return true
	}
	return errors.Is(err, dataplane.ErrDraining)
}
