package conntrackreconcile

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"k8s.io/utils/clock"

	"github.com/switchyard-proxy/switchyard/dataplane"
	"github.com/switchyard-proxy/switchyard/dataplane/conntrack"
	"github.com/switchyard-proxy/switchyard/nodeagent/internal/metrics"
	switchyardv1 "github.com/switchyard-proxy/switchyard/proto/switchyard/v1"
)

// Snapshot is what the agent applied last: the dataplane state and the
// mode that programmed it, and the syncer's sequence (Seq) read before
// them.
type Snapshot struct {
	State *dataplane.State
	Mode  switchyardv1.DataplaneMode
	// Seq is odd while a sync may be changing the kernel and moves with
	// every sync: a reconcile whose listing saw another Seq than the
	// state it judges by could take the fresh flows of an endpoint the
	// sync just programmed, not yet in State, for stale ones.
	Seq uint64
}

// Config configures a Reconciler.
type Config struct {
	// Table is the node's conntrack table.
	Table conntrack.Table
	// Interval is the time between two periodic runs, counted from the
	// end of the last run (a Trigger restarts it); it must be positive.
	Interval time.Duration
	// Current returns what the agent applied last; ok is false while
	// the kernel holds nothing the agent programmed (before its first
	// successful sync, while kube-proxy has the node).
	Current func() (st Snapshot, ok bool)
	// Families to reconcile; both when empty.
	Families []dataplane.Family
	// Metrics, Logger and Clock are optional.
	Metrics *metrics.Metrics
	Logger  *slog.Logger
	Clock   clock.Clock
}

// Reconciler runs conntrack reconciles on its own goroutine (Run).
type Reconciler struct {
	cfg  Config
	kick chan struct{}
	// idleMode is the mode last logged as one without DNAT, so that it
	// is said once, not every interval. Owned by Run.
	idleMode switchyardv1.DataplaneMode
}

// New checks cfg and returns a Reconciler.
func New(cfg Config) (*Reconciler, error) {
	if cfg.Table == nil || cfg.Current == nil {
		return nil, errors.New("conntrack reconciler: Table and Current are required")
	}
	if cfg.Interval <= 0 {
		return nil, fmt.Errorf("conntrack reconciler: interval %v: must be positive", cfg.Interval)
	}
	fams, err := dataplane.Families(cfg.Families)
	if err != nil {
		return nil, fmt.Errorf("conntrack reconciler: %w", err)
	}
	cfg.Families = fams
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.RealClock{}
	}
	return &Reconciler{cfg: cfg, kick: make(chan struct{}, 1)}, nil
}

// Trigger asks for a run soon; it never blocks, and triggers that come
// while one is pending make one run.
func (r *Reconciler) Trigger() {
	select {
	case r.kick <- struct{}{}:
	default:
	}
}

// Run reconciles on each Trigger and every Interval until ctx is done;
// it returns nil then.
func (r *Reconciler) Run(ctx context.Context) error {
	t := r.cfg.Clock.NewTimer(r.cfg.Interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-r.kick:
			if !t.Stop() {
				select {
				case <-t.C():
				default:
				}
			}
		case <-t.C():
		}
		r.Once(ctx)
		t.Reset(r.cfg.Interval)
	}
}

// Once runs one reconcile of every family now; failures are counted and
// logged (the next run retries), and the result is returned for tests.
func (r *Reconciler) Once(ctx context.Context) map[dataplane.Family]conntrack.Result {
	snap, ok := r.cfg.Current()
	if !ok {
		r.cfg.Logger.Debug("conntrack reconcile skipped: nothing applied by this agent")
		return nil
	}
	if snap.Seq%2 == 1 {
		// The sync's own trigger, or the next interval, runs it again.
		r.cfg.Logger.Debug("conntrack reconcile skipped: a sync is changing the kernel")
		return nil
	}
	switch snap.Mode {
	case switchyardv1.DataplaneMode_DATAPLANE_MODE_USERSPACE, switchyardv1.DataplaneMode_DATAPLANE_MODE_DRY_RUN:
		if r.idleMode != snap.Mode {
			r.idleMode = snap.Mode
			r.cfg.Logger.Info("conntrack reconciler idle: the mode does no DNAT", "mode", dataplane.ModeName(snap.Mode))
		}
		return nil
	}
	r.idleMode = switchyardv1.DataplaneMode_DATAPLANE_MODE_UNSPECIFIED
	out := map[dataplane.Family]conntrack.Result{}
	for _, fam := range r.cfg.Families {
		if ctx.Err() != nil {
			return out
		}
		start := r.cfg.Clock.Now()
		moved := false
		res, err := conntrack.ReconcileTable(ctx, r.cfg.Table, fam, func() conntrack.Live {
			// After the listing: the state must be the one the kernel
			// held throughout it, which an unchanged even Seq proves. An
			// empty Live judges nothing stale.
			if cur, ok := r.cfg.Current(); !ok || cur.Seq != snap.Seq {
				moved = true
				return conntrack.Live{}
			}
			return Live(snap.State, fam, snap.Mode)
		})
		d := r.cfg.Clock.Since(start)
		out[fam] = res
		if moved {
			r.cfg.Logger.Debug("conntrack reconcile skipped: a sync ran during the listing", "ipFamily", fam.String())
			continue
		}
		if err != nil {
			r.cfg.Metrics.ConntrackReconcileFailed(fam.String())
			r.cfg.Logger.Warn("conntrack reconcile failed; retried at the next one", "ipFamily", fam.String(), "err", err)
			continue
		}
		byReason := map[string]int{}
		for _, s := range res.Stale {
			byReason[string(s.Reason)]++
		}
		if len(byReason) > 0 && res.Deleted < len(res.Stale) {
			// Gone meanwhile (expired, or the client's next packet was
			// judged by the kernel first): nothing left to count.
			scale(byReason, res.Deleted, len(res.Stale))
		}
		r.cfg.Metrics.ConntrackReconciled(fam.String(), d, byReason)
		level := slog.LevelDebug
		if res.Deleted > 0 {
			level = slog.LevelInfo
		}
		r.cfg.Logger.Log(ctx, level, "conntrack reconciled", "ipFamily", fam.String(), "mode", dataplane.ModeName(snap.Mode),
			"listed", res.Listed, "stale", len(res.Stale), "deleted", res.Deleted, "byReason", byReason, "duration", d)
	}
	return out
}

// scale lowers the per-reason counts of stale entries to the deleted
// total when some were gone before the delete: the kernel does not say
// which, so the shortfall is taken from the largest reasons first and
// the counter never counts an entry it did not delete.
func scale(byReason map[string]int, deleted, stale int) {
	short := stale - deleted
	for short > 0 {
		var top string
		for k, n := range byReason {
			if n > 0 && (top == "" || n > byReason[top] || n == byReason[top] && k < top) {
				top = k
			}
		}
		if top == "" {
			return
		}
		byReason[top]--
		short--
	}
}
