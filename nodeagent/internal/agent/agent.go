package agent

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/pprof"
	"net/netip"
	"syscall"
	"time"

	"golang.org/x/sync/errgroup"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/types/known/timestamppb"
	"k8s.io/utils/clock"

	"github.com/switchyard-proxy/switchyard/dataplane"
	"github.com/switchyard-proxy/switchyard/dataplane/conntrack"
	"github.com/switchyard-proxy/switchyard/nodeagent/internal/canary"
	"github.com/switchyard-proxy/switchyard/nodeagent/internal/conntrackreconcile"
	"github.com/switchyard-proxy/switchyard/nodeagent/internal/discovery"
	"github.com/switchyard-proxy/switchyard/nodeagent/internal/health"
	"github.com/switchyard-proxy/switchyard/nodeagent/internal/healthcheck"
	"github.com/switchyard-proxy/switchyard/nodeagent/internal/links"
	"github.com/switchyard-proxy/switchyard/nodeagent/internal/metrics"
	"github.com/switchyard-proxy/switchyard/nodeagent/internal/persist"
	"github.com/switchyard-proxy/switchyard/nodeagent/internal/syncer"
	"github.com/switchyard-proxy/switchyard/nodeagent/internal/view"
	switchyardv1 "github.com/switchyard-proxy/switchyard/proto/switchyard/v1"
)

var (
	_ discovery.Applier  = (*syncer.Syncer)(nil)
	_ discovery.Observer = (*metrics.Metrics)(nil)
	_ syncer.Decorator   = (*canary.Canary)(nil)
)

// Options configure an Agent.
type Options struct {
	NodeName     string
	AgentVersion string
	// ControlPlanes are the configured control-plane addresses, tried in
	// turn after those learnt from the control plane.
	ControlPlanes []string
	// DialOptions carry the transport credentials.
	DialOptions []grpc.DialOption
	// LearntDialOptions replace DialOptions for learnt addresses that are
	// not configured (discovery.Config.LearntDialOptions); nil means
	// DialOptions.
	LearntDialOptions []grpc.DialOption
	// Credentials, when set, keeps the TLS files behind DialOptions'
	// credentials current (tlscreds.Source): the agent runs it beside the
	// stream, and a reconnect it asks for replaces the stream
	// (discovery.Config.Reconnect).
	Credentials CredentialSource
	// WatchLinks runs a watch of the node's network interfaces
	// (package links) and hands their names to every sync, for the
	// nftables mode's flowtable (NodeConfig.flowtable_interfaces); a
	// change of them brings a sync. Off in tests that need no netlink.
	WatchLinks bool
	// Metrics are the agent's; new ones when nil. Given, they can be
	// shared with what is built before the agent (the TLS files' loads).
	Metrics *metrics.Metrics
	// Mode is the dataplane mode unless a NodeConfig overrides it.
	Mode switchyardv1.DataplaneMode
	// NewDataplane builds the dataplane of a mode.
	NewDataplane func(mode switchyardv1.DataplaneMode) (dataplane.Dataplane, error)
	// CleanOthers removes what modes other than inUse left in the kernel
	// (syncer.Config.CleanOthers); nil leaves them.
	CleanOthers func(ctx context.Context, inUse switchyardv1.DataplaneMode) error
	// RetryDrain checks again the modes CleanOthers kept for their
	// connections (syncer.Config.RetryDrain); optional.
	RetryDrain func(ctx context.Context) error
	// Peer is kube-proxy on this node, which the agent takes the node over
	// from and hands it back to (syncer.Config.Peer); nil ignores it.
	Peer syncer.Peer
	// StateDir holds the persisted view and the learnt control-plane
	// addresses.
	StateDir string
	// HealthzAddr serves /healthz and /livez; MetricsAddr serves /metrics.
	// Empty disables.
	HealthzAddr, MetricsAddr string
	// Profiling serves net/http/pprof under /debug/pprof/ on MetricsAddr.
	Profiling bool
	// HealthCheckBindIP is the address health-check node ports bind to.
	HealthCheckBindIP string
	// HealthCheckListen overrides how health-check ports are opened (tests).
	HealthCheckListen func(port uint32) (net.Listener, error)
	MinSyncPeriod     time.Duration
	// SyncPacing spaces syncs (syncer.Config.Pacing).
	SyncPacing syncer.Pacing
	SyncPeriod time.Duration
	// DriftCheckInterval is the time between two checks that the kernel
	// still holds what was applied; 0 disables them.
	DriftCheckInterval time.Duration
	// DatapathCanary is the datapath canary's cluster IP and port
	// (package canary): the agent programs a Service of its own there
	// and probes it, and /healthz fails while that fails. The zero value,
	// or a zero DatapathProbeInterval, disables it.
	DatapathCanary netip.AddrPort
	// DatapathCanaryPort is where the canary answers on the node's own
	// address: its endpoint.
	DatapathCanaryPort    uint16
	DatapathProbeInterval time.Duration
	// CanaryDial and CanaryListen replace the canary's network calls
	// (tests); package net's when nil.
	CanaryDial   func(ctx context.Context, network, address string) (net.Conn, error)
	CanaryListen func(ctx context.Context, network, address string) (net.Listener, error)
	// Conntrack is the node's conntrack table; with a positive
	// ConntrackReconcileInterval the agent reconciles its UDP entries
	// with the applied state (package conntrackreconcile): after the
	// first sync, after each full sync and each sync that removed a UDP
	// endpoint or service, and every interval. Nil or 0 disables it.
	Conntrack                  conntrack.Table
	ConntrackReconcileInterval time.Duration
	// HealthTimeout is how long an update may stay queued while healthy;
	// twice the sync period when zero, as kube-proxy.
	HealthTimeout time.Duration
	Backoff       discovery.Backoff
	// Clock is the real clock when nil.
	Clock  clock.Clock
	Logger *slog.Logger
}

// CredentialSource keeps transport credentials current; tlscreds.Source
// is one.
type CredentialSource interface {
	// Run looks after the credentials until ctx ends.
	Run(ctx context.Context) error
	// Reconnect asks for a new stream (a new TLS handshake).
	Reconnect() <-chan struct{}
}

// Agent is a configured node agent.
type Agent struct {
	o       Options
	metrics *metrics.Metrics
	health  *health.Tracker
	hc      *healthcheck.Servers
	// hcIndex and hcFailed belong to syncHealthChecks.
	hcIndex  healthcheck.Index
	hcFailed bool
	syncer   *syncer.Syncer
	// canary is the datapath canary; nil when disabled.
	canary *canary.Canary
	// ct is the conntrack reconciler, nil when disabled; ctLast is the
	// view of the last sync it was told about (afterSync's).
	ct     *conntrackreconcile.Reconciler
	ctLast *view.View
	// links is the watch of the node's interfaces; nil without
	// Options.WatchLinks.
	links  *links.Watcher
	client *discovery.Client
	store  *persist.Store
	// ports are the HTTP servers (healthz, metrics) by name, on addresses
	// shared with kube-proxy (ports.go).
	ports map[string]*port
}

// New restores the persisted view, builds the components and opens the
// HTTP listeners, so address errors surface before Run.
func New(o Options) (*Agent, error) {
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.Clock == nil {
		o.Clock = clock.RealClock{}
	}
	if o.SyncPeriod <= 0 {
		o.SyncPeriod = time.Hour
	}
	if o.HealthTimeout <= 0 {
		o.HealthTimeout = 2 * o.SyncPeriod
	}
	if o.Metrics == nil {
		o.Metrics = metrics.New()
	}
	a := &Agent{o: o, metrics: o.Metrics, ports: map[string]*port{}}
	a.health = health.NewTracker(o.Clock, o.NodeName, o.HealthTimeout)
	a.hc = healthcheck.New(healthcheck.Config{Logger: o.Logger.With("component", "healthcheck"), Listen: o.HealthCheckListen,
		BindIP: o.HealthCheckBindIP, ProxyHealthy: a.health.Healthy})
	if err := a.newCanary(); err != nil {
		return nil, err
	}
	if err := a.newConntrackReconciler(); err != nil {
		return nil, err
	}
	restored, found, err := a.restore()
	if err != nil {
		return nil, err
	}
	if a.o.WatchLinks {
		// The syncer is set just below, before Run starts the watch.
		a.links = links.New(links.Config{Logger: a.o.Logger.With("component", "links"),
			OnChange: func() { a.syncer.LinksChanged() }})
	}
	if a.syncer, err = syncer.New(a.syncerConfig(), restored, found); err != nil {
		return nil, fmt.Errorf("agent: %w", err)
	}
	a.client, err = discovery.New(discovery.Config{
		Addresses:         o.ControlPlanes,
		Learnt:            a.learnt(restored),
		Node:              &switchyardv1.Node{Name: o.NodeName, AgentVersion: o.AgentVersion, Mode: o.Mode},
		DialOptions:       o.DialOptions,
		LearntDialOptions: o.LearntDialOptions,
		OnLearnt:          a.saveControlPlanes,
		Backoff:           o.Backoff,
		Applier:           a.syncer,
		Logger:            o.Logger.With("component", "discovery"),
		Clock:             o.Clock,
		Observer:          a.metrics,
		CurrentMode:       a.syncer.Mode,
		// The restored view's settings on the first stream: a replica
		// with other settings than the one that sent them reports it.
		CurrentSettingsHash: a.syncer.SettingsHash,
		CurrentDrift:        a.syncer.Drift,
		CurrentDatapath:     a.datapathReport,
		Refresh:             a.health.ReportChanged(),
		Reconnect:           reconnect(o.Credentials),
	})
	if err != nil {
		return nil, fmt.Errorf("agent: %w", err)
	}
	if err := a.listen(); err != nil {
		a.closeListeners()
		return nil, err
	}
	return a, nil
}

// reconnect is the reconnect signal of c; nil without credentials to
// look after.
func reconnect(c CredentialSource) <-chan struct{} {
	if c == nil {
		return nil
	}
	return c.Reconnect()
}

// datapathReport is the datapath probe's verdict for the control plane;
// nil without a canary or before its first probe.
func (a *Agent) datapathReport() *switchyardv1.DatapathStatus {
	st, ok := a.health.Datapath()
	if !ok {
		return nil
	}
	r := &switchyardv1.DatapathStatus{Healthy: st.Healthy, Error: st.Err}
	if !st.LastProbe.IsZero() {
		r.LastProbe = timestamppb.New(st.LastProbe)
	}
	return r
}

// newCanary builds the datapath canary when it is configured. Its probes
// count only after the first successful sync: before it the kernel holds
// nothing the agent programmed.
func (a *Agent) newCanary() error {
	if !a.o.DatapathCanary.IsValid() || a.o.DatapathProbeInterval <= 0 {
		return nil
	}
	c, err := canary.New(canary.Config{
		VIP:      a.o.DatapathCanary,
		Port:     a.o.DatapathCanaryPort,
		Interval: a.o.DatapathProbeInterval,
		Armed:    func() bool { return a.syncer.Synced() && !a.syncer.Holding() },
		Health:   a.health,
		Metrics:  a.metrics,
		Clock:    a.o.Clock,
		Logger:   a.o.Logger.With("component", "canary"),
		Dial:     a.o.CanaryDial,
		Listen:   a.o.CanaryListen,
	})
	if err != nil {
		return fmt.Errorf("agent: %w", err)
	}
	a.canary = c
	return nil
}

func (a *Agent) syncerConfig() syncer.Config {
	var dec syncer.Decorator
	if a.canary != nil {
		dec = a.canary
	}
	return syncer.Config{
		Decorator:     dec,
		Logger:        a.o.Logger.With("component", "syncer"),
		Clock:         a.o.Clock,
		MinSyncPeriod: a.o.MinSyncPeriod,
		Pacing:        a.o.SyncPacing,
		SyncPeriod:    a.o.SyncPeriod,
		Mode:          a.o.Mode,
		NewDataplane:  a.o.NewDataplane,
		CleanOthers:   a.o.CleanOthers,
		RetryDrain:    a.o.RetryDrain,
		Peer:          a.o.Peer,
		OnHandover:    a.handover,
		Journal:       a.store,
		Metrics:       a.metrics,
		Health:        a.health,
		OnApplied:     a.afterSync,

		DriftCheckInterval: a.o.DriftCheckInterval,
		Links:              a.linkNames(),
	}
}

// linkNames is the syncer's Config.Links: the link watch's names, nil
// without one.
func (a *Agent) linkNames() func() []string {
	if a.links == nil {
		return nil
	}
	return a.links.Names
}

// handover follows the node's hand-over to kube-proxy (handedBack) and
// back: kube-proxy serves the health and metrics ports and the
// health-check node ports while it forwards, and the agent serves them
// again once it took the node back. Called from the syncer's goroutine,
// as syncHealthChecks is.
func (a *Agent) handover(handedBack bool) {
	a.servePorts(!handedBack)
	a.metrics.HandedOver(handedBack)
	if handedBack {
		_ = a.hc.Sync(nil) // stopping only; nothing to fail but a close
		// The next sync after the node is taken back starts them all.
		a.hcFailed = true
	}
}

// afterSync is the syncer's OnApplied: the health-check servers follow
// the view, and the conntrack reconciler is asked for a run when the
// sync may have left stale UDP entries that the mode's own cleanup did
// not see (a first or full sync: start, switch, repair) or removed UDP
// endpoints or services. Asking never waits: the run is on the
// reconciler's goroutine, outside the sync.
func (a *Agent) afterSync(v *view.View, changed map[string]struct{}) {
	a.syncHealthChecks(v, changed)
	if a.ct == nil {
		return
	}
	if changed == nil || conntrackreconcile.Removed(a.ctLast, v, changed) {
		a.ct.Trigger()
	}
	a.ctLast = v
}

// newConntrackReconciler builds the conntrack reconciler when it is
// configured. It compares with what the syncer applied last, and with
// nothing while the kernel holds nothing of the agent's.
func (a *Agent) newConntrackReconciler() error {
	if a.o.Conntrack == nil || a.o.ConntrackReconcileInterval <= 0 {
		return nil
	}
	r, err := conntrackreconcile.New(conntrackreconcile.Config{
		Table:    a.o.Conntrack,
		Interval: a.o.ConntrackReconcileInterval,
		Current: func() (conntrackreconcile.Snapshot, bool) {
			seq := a.syncer.ProgramSeq() // before what it vouches for
			if !a.syncer.Synced() || a.syncer.Holding() {
				return conntrackreconcile.Snapshot{}, false
			}
			return conntrackreconcile.Snapshot{State: a.syncer.Applied().State(), Mode: a.syncer.Mode(), Seq: seq}, true
		},
		Metrics: a.metrics,
		Logger:  a.o.Logger.With("component", "conntrack"),
		Clock:   a.o.Clock,
	})
	if err != nil {
		return fmt.Errorf("agent: %w", err)
	}
	a.ct = r
	return nil
}

// syncHealthChecks starts and stops the health-check servers after a
// sync, looking only at the services it changed; a failed start is
// retried after the next sync. Called from the syncer's goroutine.
func (a *Agent) syncHealthChecks(v *view.View, changed map[string]struct{}) {
	svcs, moved := a.hcIndex.Update(v, changed)
	if !moved && !a.hcFailed {
		return
	}
	err := a.hc.Sync(svcs)
	a.hcFailed = err != nil
	if err != nil {
		a.o.Logger.Error("health-check servers", "err", err)
	}
}

// restore loads the persisted view. A file that cannot be trusted (see
// persist.Load) is logged, counted and ignored: the kernel keeps its rules
// as found and the control plane's first response, a whole view since
// none is announced, is the first sync. A pending intent (a crash between
// a commit and its save) adds its resources to the restored view and
// leaves its removals to the control plane, so the restore adds and
// updates but removes nothing the kernel may hold.
func (a *Agent) restore() (*view.View, bool, error) {
	store, err := persist.New(a.o.StateDir, a.o.NodeName)
	if err != nil {
		return nil, false, fmt.Errorf("agent: %w", err)
	}
	a.store = store
	r, err := store.Load()
	if err != nil {
		reason, _ := persist.IsRejected(err)
		a.metrics.StateRejected(reason)
		a.o.Logger.Warn("state file rejected; the kernel's rules are kept as found until the control plane answers",
			"reason", reason, "err", err)
		return nil, false, nil
	}
	if !r.Found() {
		return nil, false, nil
	}
	v := r.Merged()
	if r.TornTail {
		a.o.Logger.Info("the state log's last record was torn by a crash while it was written, and is dropped: its write never returned")
	}
	if p := r.Pending; p != nil {
		a.o.Logger.Info("restoring an update that may have been committed: its resources are added, its removals wait for the control plane",
			"savedVersion", r.View.SystemVersion, "pendingVersion", p.SystemVersion, "resources", len(p.Resources), "removals", len(p.Removed))
	}
	a.o.Logger.Info("restored persisted view", "systemVersion", v.SystemVersion, "resources", len(v.Resources))
	return v, true, nil
}

// learnt returns the control-plane addresses learnt earlier: the
// persisted list or, when that file is missing, empty or unreadable
// (logged at warn), the list in the restored view's NodeConfig (an agent
// upgraded from a version without the file, or a lost file: the control
// plane resends a NodeConfig only when it changes). Nil means only the
// configured addresses are dialled.
func (a *Agent) learnt(restored *view.View) []string {
	path := a.store.ControlPlanesPath()
	addrs, found, err := a.store.LoadControlPlanes()
	switch {
	case err != nil:
		a.o.Logger.Warn("ignoring unreadable control-plane addresses; dialling the configured ones", "path", path, "err", err)
	case found && len(addrs) == 0:
		a.o.Logger.Warn("persisted control-plane addresses are empty; dialling the configured ones", "path", path)
	case found:
		a.o.Logger.Info("restored learnt control-plane addresses", "addresses", addrs)
		return addrs
	}
	var fromView []string
	if restored != nil {
		fromView = restored.NodeConfig().GetControlPlaneAddresses()
	}
	if len(fromView) == 0 {
		return nil
	}
	a.o.Logger.Info("control-plane addresses taken from the restored view", "addresses", fromView)
	a.saveControlPlanes(fromView)
	return fromView
}

// saveControlPlanes persists learnt control-plane addresses. A failure is
// logged: the agent goes on with the list in memory.
func (a *Agent) saveControlPlanes(addrs []string) {
	if err := a.store.SaveControlPlanes(addrs); err != nil {
		a.o.Logger.Error("persisting the learnt control-plane addresses failed", "err", err)
	}
}

// ControlPlanes returns the addresses the agent dials, in order.
func (a *Agent) ControlPlanes() []string { return a.client.Targets() }

// listen binds the HTTP addresses, so that a bad one fails New. One that
// another process holds (kube-proxy, still running on the node, holds
// 10256 and 10249, which are ours too) is not an error: the agent forwards
// at once and serves it once free.
func (a *Agent) listen() error {
	handlers := map[string]http.Handler{"healthz": a.health.Mux(), "metrics": metricsMux(a.metrics, a.syncer.Mode, a.o.Profiling)}
	for name, addr := range map[string]string{"healthz": a.o.HealthzAddr, "metrics": a.o.MetricsAddr} {
		if addr == "" {
			continue
		}
		l, err := net.Listen("tcp", addr)
		if err != nil && !errors.Is(err, syscall.EADDRINUSE) {
			return fmt.Errorf("agent: %s address: %w", name, err)
		}
		a.ports[name] = newPort(name, addr, l, handlers[name], a.o.Logger)
	}
	return nil
}

func (a *Agent) closeListeners() {
	for _, p := range a.ports {
		if p.first != nil {
			_ = p.first.Close()
		}
	}
}

// servePorts serves (true) or lets go (false) the HTTP addresses shared
// with kube-proxy: the node is handed to kube-proxy, or taken back.
func (a *Agent) servePorts(on bool) {
	for _, p := range a.ports {
		p.Serve(on)
	}
}

// HealthzAddr is the address /healthz listens on; empty when disabled.
func (a *Agent) HealthzAddr() string { return a.addr("healthz") }

// MetricsAddr is the address /metrics listens on; empty when disabled.
func (a *Agent) MetricsAddr() string { return a.addr("metrics") }

func (a *Agent) addr(name string) string {
	p, ok := a.ports[name]
	if !ok {
		return ""
	}
	if addr := p.Addr(); addr != "" {
		return addr
	}
	if p.first != nil && p.wanted() {
		// Bound by New, served as soon as Run starts.
		return p.first.Addr().String()
	}
	return ""
}

// Run runs the agent until ctx is done. The stream is closed then and the
// rules stay in place.
func (a *Agent) Run(ctx context.Context) error {
	defer a.hc.Close()
	g, ctx := errgroup.WithContext(ctx)
	g.Go(func() error { return a.syncer.Run(ctx) })
	g.Go(func() error { return a.client.Run(ctx) })
	if a.canary != nil {
		g.Go(func() error { return a.canary.Run(ctx) })
	}
	if a.ct != nil {
		g.Go(func() error { return a.ct.Run(ctx) })
	}
	if a.o.Credentials != nil {
		g.Go(func() error { return a.o.Credentials.Run(ctx) })
	}
	if a.links != nil {
		g.Go(func() error { return a.links.Run(ctx) })
	}
	for _, p := range a.ports {
		g.Go(func() error { return p.run(ctx) })
	}
	if err := g.Wait(); err != nil {
		return fmt.Errorf("agent: %w", err)
	}
	return nil
}

// metricsMux serves /metrics and, like kube-proxy's metrics port,
// /proxyMode: the mode in use as plain text ("iptables", "nftables", …),
// which operators' scripts and upstream's e2e "should check kube-proxy
// urls" read; with profiling, also Go's profiles under /debug/pprof/.
func metricsMux(m *metrics.Metrics, mode func() switchyardv1.DataplaneMode, profiling bool) *http.ServeMux {
	mux := http.NewServeMux()
	if profiling {
		mux.HandleFunc("/debug/pprof/", pprof.Index)
		mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
		mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
		mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
		mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	}
	mux.Handle("/metrics", m.Handler())
	mux.HandleFunc("/proxyMode", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		fmt.Fprint(w, dataplane.ModeName(mode()))
	})
	return mux
}
