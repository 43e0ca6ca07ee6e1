package syncer

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"k8s.io/utils/clock"

	"github.com/switchyard-proxy/switchyard/dataplane"
	"github.com/switchyard-proxy/switchyard/nodeagent/internal/health"
	"github.com/switchyard-proxy/switchyard/nodeagent/internal/metrics"
	"github.com/switchyard-proxy/switchyard/nodeagent/internal/view"
	switchyardv1 "github.com/switchyard-proxy/switchyard/proto/switchyard/v1"
)

// ErrStopped is returned by Apply once Run has returned.
var ErrStopped = errors.New("syncer stopped")

// Journal persists what the kernel holds, so that a restart never
// restores a view older than the kernel's (persist.Store implements it).
type Journal interface {
	// Intend records, before a commit, that the kernel may soon hold u's
	// resources on top of the last saved view.
	Intend(u *view.Update) error
	// Save records v as the applied view, after its commit; changed
	// names every resource that may differ from the view of the last
	// Save (nil: unknown), so that only those need writing.
	Save(v *view.View, changed map[string]struct{}) error
}

// Decorator adds what the agent programs on its own behalf to the state
// of every sync (the datapath canary, package canary): after the view's
// updates, before Apply. What it adds is never in the applied view, so
// never in the journal, the versions announced or the reports.
type Decorator interface {
	// Decorate sets or deletes, in st, the services it owns, replacing
	// any of the view's by those names, and returns their names. st's
	// maps are this sync's own copies, so it may modify them; it must
	// do no I/O. changed names the services of st that may differ from
	// the state of the previous call (nil: any may, e.g. a full sync).
	Decorate(st *dataplane.State, changed map[string]struct{}) (owned []string)
}

// Config configures a Syncer.
type Config struct {
	Logger *slog.Logger
	// Clock times syncs; the real clock when nil.
	Clock clock.Clock
	// MinSyncPeriod is the shortest time between two syncs (PacingBounded)
	// or the longest a change waits for a sync (PacingAdaptive); a
	// NodeConfig's sync settings override it.
	MinSyncPeriod time.Duration
	// Pacing spaces syncs; the zero value is kube-proxy's PacingBounded.
	Pacing Pacing
	// SyncPeriod is the time between full resyncs; a NodeConfig's sync
	// settings override it.
	SyncPeriod time.Duration
	// Mode is the dataplane mode unless a NodeConfig overrides it.
	Mode switchyardv1.DataplaneMode
	// NewDataplane builds the dataplane of a mode.
	NewDataplane func(mode switchyardv1.DataplaneMode) (dataplane.Dataplane, error)
	// Journal records each update before its commit and each applied
	// view after it; optional.
	Journal Journal
	// Metrics and Health are optional.
	Metrics *metrics.Metrics
	Health  *health.Tracker
	// OnApplied is called after each successful sync with the applied view
	// and the names that may have changed since the last call (nil:
	// unknown, after a full sync), e.g. to start and stop health-check
	// servers; optional.
	OnApplied func(v *view.View, changed map[string]struct{})
	// CleanOthers removes what the modes other than inUse left in the
	// kernel (leftovers.Cleaner.Clean); optional. It runs after the
	// first successful sync of a mode, once its ACK is answered: at start
	// (an agent restarted in another mode) and after each switch; after a
	// failure, again after each full sync until it succeeds. Never before:
	// services that exist in both modes keep forwarding throughout.
	CleanOthers func(ctx context.Context, inUse switchyardv1.DataplaneMode) error
	// RetryDrain checks again the modes the last CleanOthers kept for
	// their connections (dataplane.ErrDraining) and removes those that
	// drained (leftovers.Cleaner.Retry); it runs every
	// drainRetryInterval while they drain. Optional: without it the
	// retry runs CleanOthers whole.
	RetryDrain func(ctx context.Context) error
	// Peer is the other proxy on the node (kube-proxy) that this agent
	// takes the node over from and hands it back to (handover.go);
	// optional. PeerCheckInterval is how often it is looked at
	// (DefaultPeerCheckInterval when 0), PeerGoneAfter how long it must
	// stay silent to be taken for stopped (DefaultPeerGoneAfter).
	Peer              Peer
	PeerCheckInterval time.Duration
	PeerGoneAfter     time.Duration
	// OnHandover is told when the node is handed to the peer (true: the
	// agent lets its ports go, kube-proxy's too) and taken back (false);
	// optional. Called from Run's goroutine.
	OnHandover func(handedBack bool)
	// DriftCheckInterval is the time between two checks that the kernel
	// still holds what the dataplane applied (dataplane.DriftChecker;
	// modes without one are reported "unsupported"); a drift is repaired
	// with a full sync. 0 disables the checks.
	DriftCheckInterval time.Duration
	// Decorator adds the agent's own services to each sync's state;
	// optional.
	Decorator Decorator
	// Links returns the node's interface names (links.Watcher.Names),
	// put in each sync's state (dataplane.State.Links) for the modes
	// that program per-interface objects; optional. A change of them is
	// told with LinksChanged.
	Links func() []string
}

// Syncer applies views through a dataplane.
type Syncer struct {
	cfg     Config
	reqs    chan *request
	stopped chan struct{}
	// links is signalled by LinksChanged; one pending signal is enough.
	links     chan struct{}
	reconcile bool
	// started is when New ran: trigger times before it are not observed.
	started time.Time
	// queued counts received requests, for tests.
	queued atomic.Int64
	// everSynced: a sync has succeeded since New (Synced).
	everSynced atomic.Bool
	// progSeq: see ProgramSeq.
	progSeq atomic.Uint64

	mu      sync.Mutex
	applied *view.View
	// config is applied's NodeConfig.
	config *switchyardv1.NodeConfig

	// mode is the mode of dp; written by Run under mu.
	mode switchyardv1.DataplaneMode

	// Owned by the Run goroutine.
	// state is the dataplane state of applied, carried from sync to
	// sync (view.WithState) rather than rebuilt from the whole view.
	state    *dataplane.State
	dp       dataplane.Dataplane
	lastSync time.Time
	// lastCost is what the last sync's programming took (Pacing).
	lastCost time.Duration
	synced   bool
	// othersLeft: the other modes' leftovers are not cleaned up since
	// the last switch (or start), or a switch failed and may have left
	// part of the new mode.
	othersLeft bool
	// drainRetry: the last cleanup kept a mode for its connections
	// (dataplane.ErrDraining); Run retries every drainRetryInterval.
	drainRetry bool
	// repair: the last sync failed. The kernel may hold part of it (a
	// commit that got half-way) and the journal a record of it, so the
	// next sync is full, as kube-proxy's needFullSync, and its view is
	// saved even when it carries no update.
	repair bool
	// drift is what the drift checks found; guarded by mu.
	drift driftState
	// The hand-over with Config.Peer (handover.go), owned by Run: ho is
	// who forwards; peerLeft, that the peer's leftovers are not removed
	// yet; peerErr the last failure to, logged once until it changes;
	// peerGone when the peer's health first went silent (zero: it answers).
	ho       handover
	peerLeft bool
	peerErr  string
	peerGone time.Time
	// holding: the peer forwards, this agent writes nothing (Holding).
	holding atomic.Bool
	// fullNow: run a full sync at the loop's next turn.
	fullNow bool
}

type request struct {
	u      *view.Update
	result chan result
}

type result struct {
	applied view.Applied
	err     error
}

// New returns a Syncer holding restored as its applied view. When reconcile
// is true (restored was loaded from disk), Run starts with a full Apply of
// it.
func New(cfg Config, restored *view.View, reconcile bool) (*Syncer, error) {
	if cfg.NewDataplane == nil {
		return nil, errors.New("syncer: no dataplane constructor")
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.RealClock{}
	}
	if cfg.SyncPeriod <= 0 {
		cfg.SyncPeriod = time.Hour
	}
	if restored == nil {
		restored = &view.View{Resources: map[string]*switchyardv1.Resource{}}
	}
	st := restored.State()
	return &Syncer{cfg: cfg, reqs: make(chan *request), stopped: make(chan struct{}), links: make(chan struct{}, 1), reconcile: reconcile,
		started: cfg.Clock.Now(), applied: restored, config: st.Config, state: st, peerLeft: cfg.Peer != nil}, nil
}

// Versions returns the versions of the applied resources; it implements
// discovery.Applier.
func (s *Syncer) Versions() map[string]string {
	return s.Applied().Versions()
}

// Mode returns the mode programmed now: the configured one until a first
// successful sync.
func (s *Syncer) Mode() switchyardv1.DataplaneMode {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.mode == switchyardv1.DataplaneMode_DATAPLANE_MODE_UNSPECIFIED {
		return s.cfg.Mode
	}
	return s.mode
}

// Synced reports whether a sync has succeeded since the Syncer started:
// from then on the kernel holds what the agent programmed.
func (s *Syncer) Synced() bool { return s.everSynced.Load() }

// ProgramSeq is odd while a sync may be changing the kernel (and has not
// yet recorded what it applied) and grows by two with every sync: equal
// even values read before and after a look at the kernel mean Applied,
// read between them, is what the kernel held throughout.
func (s *Syncer) ProgramSeq() uint64 { return s.progSeq.Load() }

// SettingsHash is the settings_hash of the applied view's NodeConfig,
// empty without one: the agent reports it so the control plane sees which
// replica's settings it programs.
func (s *Syncer) SettingsHash() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.config.GetSettingsHash()
}

// Applied returns the applied view.
func (s *Syncer) Applied() *view.View {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.applied
}

// Apply queues u and waits for the sync that programs it; it implements
// discovery.Applier.
func (s *Syncer) Apply(ctx context.Context, u *view.Update) (view.Applied, error) {
	req := &request{u: u, result: make(chan result, 1)}
	select {
	case s.reqs <- req:
	case <-s.stopped:
		return view.Applied{}, ErrStopped
	case <-ctx.Done():
		return view.Applied{}, fmt.Errorf("queue update: %w", ctx.Err())
	}
	select {
	case r := <-req.result:
		return r.applied, r.err
	case <-ctx.Done():
		return view.Applied{}, fmt.Errorf("wait for sync: %w", ctx.Err())
	}
}

// periods returns the min sync and sync periods, a NodeConfig's first.
func (s *Syncer) periods() (minSync, full time.Duration) {
	minSync, full = s.cfg.MinSyncPeriod, s.cfg.SyncPeriod
	s.mu.Lock()
	ss := s.config.GetSync()
	s.mu.Unlock()
	if d := ss.GetMinSyncPeriod(); d != nil && d.AsDuration() > 0 {
		minSync = d.AsDuration()
	}
	if d := ss.GetSyncPeriod(); d != nil && d.AsDuration() > 0 {
		full = d.AsDuration()
	}
	return minSync, full
}

// Run syncs until ctx is done. It returns nil then; the rules stay.
func (s *Syncer) Run(ctx context.Context) error {
	defer close(s.stopped)
	s.peerAtStart(ctx)
	if s.reconcile {
		s.cfg.Logger.Info("reconciling restored view", "systemVersion", s.Applied().SystemVersion, "resources", len(s.Applied().Resources))
		s.sync(ctx, nil, true)
	}
	_, period := s.periods()
	full := s.cfg.Clock.NewTimer(period)
	defer full.Stop()
	var (
		pending []*request
		minT    clock.Timer
		minC    <-chan time.Time
	)
	stopMin := func() {
		if minT != nil {
			minT.Stop()
		}
		minT, minC = nil, nil
	}
	defer stopMin()
	var (
		driftT clock.Timer
		driftC <-chan time.Time
		peerT  clock.Timer
		peerC  <-chan time.Time
		drainT clock.Timer
		drainC <-chan time.Time
	)
	defer func() {
		if drainT != nil {
			drainT.Stop()
		}
	}()
	if s.cfg.Peer != nil {
		peerT = s.cfg.Clock.NewTimer(s.peerInterval())
		defer peerT.Stop()
		peerC = peerT.C()
	}
	if s.cfg.DriftCheckInterval > 0 {
		driftT = s.cfg.Clock.NewTimer(s.cfg.DriftCheckInterval)
		defer driftT.Stop()
		driftC = driftT.C()
	}
	for {
		if s.fullNow {
			s.fullNow = false
			stopMin()
			s.sync(ctx, pending, true)
			pending = nil
			continue
		}
		if len(pending) > 0 && minC == nil {
			minSync, _ := s.periods()
			wait := s.lastSync.Add(s.cfg.Pacing.gap(minSync, s.lastCost)).Sub(s.cfg.Clock.Now())
			if !s.synced || wait <= 0 {
				s.sync(ctx, pending, false)
				pending = nil
				continue
			}
			minT = s.cfg.Clock.NewTimer(wait)
			minC = minT.C()
		}
		if s.drainRetry && drainC == nil {
			drainT = s.cfg.Clock.NewTimer(drainRetryInterval)
			drainC = drainT.C()
		}
		select {
		case <-ctx.Done():
			for _, p := range pending {
				p.result <- result{err: fmt.Errorf("sync: %w", ctx.Err())}
			}
			return nil
		case r := <-s.reqs:
			s.cfg.Health.QueuedUpdate()
			s.cfg.Metrics.Queued(s.cfg.Clock.Now())
			pending = append(pending, r)
			s.queued.Add(1)
		case <-minC:
			stopMin()
			s.sync(ctx, pending, false)
			pending = nil
		case <-s.links:
			// The node's interfaces changed: a sync with the same view
			// and the new links (only the flowtable's devices can
			// differ), paced as updates are.
			if s.synced && len(pending) == 0 && minC == nil && s.usesLinks() {
				s.sync(ctx, nil, false)
			}
		case <-driftC:
			if s.checkDrift(ctx, pending) {
				stopMin()
				pending = nil
			}
			// From the end of a check: a slow read-back never queues checks.
			driftT.Reset(s.cfg.DriftCheckInterval)
		case <-peerC:
			s.checkPeer(ctx)
			peerT.Reset(s.peerInterval())
		case <-drainC:
			drainT, drainC = nil, nil
			if !s.holding.Load() {
				s.retryDrain(ctx)
			}
		case <-full.C():
			stopMin()
			s.sync(ctx, pending, true)
			pending = nil
			_, period := s.periods()
			full.Reset(period)
		}
	}
}

// usesLinks reports whether the programmed state depends on the node's
// interfaces: the nftables mode with a flowtable configured. Pods come
// and go with their veths on every node; without it those changes must
// not cost a sync. Called from Run's goroutine, which writes config.
func (s *Syncer) usesLinks() bool {
	return s.mode == switchyardv1.DataplaneMode_DATAPLANE_MODE_NFTABLES && len(s.config.GetFlowtableInterfaces()) > 0
}

// LinksChanged tells the syncer that Config.Links would now return other
// names: Run syncs with them (at once when nothing is pending; else the
// pending sync carries them) when the flowtable uses them. It never
// blocks.
func (s *Syncer) LinksChanged() {
	select {
	case s.links <- struct{}{}:
	default:
	}
}
