package watch

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"

	"github.com/switchyard-proxy/switchyard/controlplane/internal/apistatus"
	"github.com/switchyard-proxy/switchyard/controlplane/internal/model"
	"github.com/switchyard-proxy/switchyard/controlplane/internal/nodeview"
	"github.com/switchyard-proxy/switchyard/controlplane/internal/rollout"
	"github.com/switchyard-proxy/switchyard/controlplane/internal/settings"
	"github.com/switchyard-proxy/switchyard/controlplane/internal/translate"
)

// Observer receives what the watch loop does, for metrics.
type Observer interface {
	// InformerEvent counts one informer event: kind is Service,
	// EndpointSlice, Node or ServiceCIDR, typ is add, update or delete.
	InformerEvent(kind, typ string)
	// Computed reports one batch: how long translation and view
	// computation took and how many services it recomputed.
	Computed(d time.Duration, services int)
}

// Config configures a Watcher.
type Config struct {
	Client kubernetes.Interface
	// Resync is the informers' resync period; 0 disables it.
	Resync time.Duration
	// Views configures view computation. Views.Defaults are the
	// NodeConfig settings unless Settings is set.
	Views nodeview.Options
	// Settings, when set, decides the NodeConfig settings: the watch
	// reads its ConfigMap (when it names one) and hands it every change.
	Settings *settings.Source
	// Rollout, when set, is handed every settings plan (the per-node
	// settings of Node labels and of a rollout) and drives the rollout.
	Rollout *rollout.Driver
	// Publisher receives every node's newest view (a *cache.Cache).
	Publisher Publisher
	// Recorder counts skipped and clamped input (may be nil).
	Recorder translate.Recorder
	// Observer receives metrics (may be nil).
	Observer Observer
	// API tracks whether each watched resource's list and watch reach the
	// API server (nil: a private one nobody reads).
	API    *apistatus.Tracker
	Logger *slog.Logger
}

// Watcher runs the informers and keeps the published views current.
type Watcher struct {
	cfg   Config
	dirty *dirty
	ready chan struct{}
}

// New returns a Watcher; Run starts it.
func New(cfg Config) *Watcher {
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Observer == nil {
		cfg.Observer = nopObserver{}
	}
	if cfg.API == nil {
		cfg.API = apistatus.New(apistatus.Options{Logger: cfg.Logger})
	}
	return &Watcher{cfg: cfg, dirty: newDirty(), ready: make(chan struct{})}
}

// Ready is closed once the informers have synced and every node's first
// view is published: the control plane may report itself serving.
func (w *Watcher) Ready() <-chan struct{} { return w.ready }

// Run watches until ctx is cancelled. It returns ctx's error on shutdown,
// or an error if the caches cannot sync.
func (w *Watcher) Run(ctx context.Context) error {
	if w.cfg.Client == nil || w.cfg.Publisher == nil {
		return errors.New("watch: Config needs a Client and a Publisher")
	}
	withCIDRs, err := servesServiceCIDRs(ctx, w.cfg.Client.Discovery(), w.cfg.Logger)
	if err != nil {
		return err
	}
	if !withCIDRs {
		w.cfg.Logger.Info("the API serves no ServiceCIDRs (networking.k8s.io/v1): NodeConfigs carry no service ranges")
	}
	inf, err := newInformers(w.cfg.Client, w.cfg.Resync, withCIDRs, w.cfg.API, w.configMap())
	if err != nil {
		return err
	}
	regs, err := w.register(inf)
	if err != nil {
		return err
	}
	infCtx, stopInformers := context.WithCancel(ctx)
	inf.start(infCtx)
	defer inf.wait()
	defer stopInformers()
	// The handlers too: the first batch is the keys they marked, so a
	// handler still delivering the initial list would leave objects out
	// of the first views.
	if err := waitSynced(ctx, append(inf.synced(), regs...)); err != nil {
		return err
	}
	st := &store{
		st: model.NewState(), rec: w.cfg.Recorder, log: w.cfg.Logger,
		owner:    map[model.SliceKey]model.ServiceKey{},
		services: inf.services.GetStore(), slices: inf.slices.GetStore(), nodes: inf.nodes.GetStore(),
		serviceCIDRs: inf.serviceCIDRStore(),
	}
	set := newSettingsFeed(w.cfg.Settings, w.cfg.Rollout, inf.configMapStore(), w.configMap())
	pub := newPublisher(w.cfg.Publisher)
	start := time.Now()
	b := w.dirty.take()
	st.apply(b)
	views := w.cfg.Views
	views.Defaults = set.initial(views.Defaults)
	ix := nodeview.NewIndex(st.st, views)
	ix, _, _ = set.plan(ix, views.Defaults, st.st.Nodes)
	set.inUse(ix)
	pub.all(ix, st.st)
	w.cfg.Observer.Computed(time.Since(start), len(st.st.Services))
	w.cfg.Logger.Info("initial views published", "services", len(st.st.Services),
		"nodes", len(st.st.Nodes), "duration", time.Since(start))
	close(w.ready)

	for {
		select {
		case <-ctx.Done():
			return context.Cause(ctx)
		case <-w.dirty.wake:
		}
		b := w.dirty.take()
		if b.empty() {
			continue
		}
		start := time.Now()
		ch := st.apply(b)
		services := ch.services
		if b.configMap {
			set.reread()
			// A new default algorithm may change every service without
			// an annotation: recompute them all in this one Update.
			if lb := set.loadBalancing(); lb != ix.LoadBalancing() {
				ix = ix.WithLoadBalancing(lb)
				services = st.serviceKeys()
			}
		}
		var changed nodeview.Changes
		ix, changed = ix.Update(st.st, services, ch.nodes)
		if b.configMap || len(ch.nodes) > 0 {
			var all bool
			var nodes []string
			ix, all, nodes = set.update(ix, st.st.Nodes)
			changed.AllConfigs = changed.AllConfigs || all
			changed.ConfigNodes = mergeSorted(changed.ConfigNodes, nodes)
		}
		pub.changed(ix, st.st, changed, ch.nodes, ch.triggers)
		w.cfg.Observer.Computed(time.Since(start), len(ch.services))
	}
}

func (w *Watcher) register(inf *informerSet) ([]cache.InformerSynced, error) {
	regs := []struct {
		kind string
		inf  cache.SharedIndexInformer
		mark func(ns, name string)
	}{
		{"Service", inf.services, func(ns, name string) { w.dirty.addService(model.ServiceKey{Namespace: ns, Name: name}) }},
		{"EndpointSlice", inf.slices, func(ns, name string) { w.dirty.addSlice(model.SliceKey{Namespace: ns, Name: name}) }},
		{"Node", inf.nodes, func(_, name string) { w.dirty.addNode(name) }},
		{"ServiceCIDR", inf.serviceCIDRs, func(_, name string) { w.dirty.addServiceCIDR(name) }},
		{"ConfigMap", inf.configMap, func(string, string) { w.dirty.addConfigMap() }},
	}
	var synced []cache.InformerSynced
	for _, r := range regs {
		if r.inf == nil {
			continue // not served
		}
		h := handler{kind: r.kind, mark: r.mark, obs: w.cfg.Observer, log: w.cfg.Logger}
		reg, err := r.inf.AddEventHandler(h)
		if err != nil {
			return nil, fmt.Errorf("watch: register %s handler: %w", r.kind, err)
		}
		synced = append(synced, reg.HasSynced)
	}
	return synced, nil
}

// handler turns informer events into dirty keys.
type handler struct {
	kind string
	mark func(ns, name string)
	obs  Observer
	log  *slog.Logger
}

func (h handler) OnAdd(obj any, _ bool) { h.on("add", obj) }
func (h handler) OnUpdate(_, obj any)   { h.on("update", obj) }
func (h handler) OnDelete(obj any)      { h.on("delete", obj) }
func (h handler) on(typ string, obj any) {
	h.obs.InformerEvent(h.kind, typ)
	key, err := cache.DeletionHandlingMetaNamespaceKeyFunc(obj)
	if err != nil {
		h.log.Warn("informer event without a key", "kind", h.kind, "err", err)
		return
	}
	ns, name, found := strings.Cut(key, "/")
	if !found {
		ns, name = "", key
	}
	h.mark(ns, name)
}

type nopObserver struct{}

func (nopObserver) InformerEvent(string, string) {}
func (nopObserver) Computed(time.Duration, int)  {}

// syncPoll is how often waitSynced looks at the informers: client-go's
// WaitForCacheSync looks every 100 ms, which a cold start (the first
// views of every node, and an agent's first sync behind them) waited for
// on average half of, for caches that had synced.
const syncPoll = 5 * time.Millisecond

// waitSynced returns when every informer has synced, or ctx's cause.
func waitSynced(ctx context.Context, synced []cache.InformerSynced) error {
	err := wait.PollUntilContextCancel(ctx, syncPoll, true, func(context.Context) (bool, error) {
		for _, ok := range synced {
			if !ok() {
				return false, nil
			}
		}
		return true, nil
	})
	if err != nil {
		return fmt.Errorf("watch: informer caches did not sync: %w", context.Cause(ctx))
	}
	return nil
}
