package watch

import (
	"slices"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/cache"

	"github.com/switchyard-proxy/switchyard/controlplane/internal/model"
	"github.com/switchyard-proxy/switchyard/controlplane/internal/nodeview"
	"github.com/switchyard-proxy/switchyard/controlplane/internal/rollout"
	"github.com/switchyard-proxy/switchyard/controlplane/internal/settings"
)

// configMapRef names the settings ConfigMap; an empty name is none.
type configMapRef struct{ namespace, name string }

func (w *Watcher) configMap() configMapRef {
	if w.cfg.Settings == nil {
		return configMapRef{}
	}
	ns, name, _ := w.cfg.Settings.ConfigMap()
	return configMapRef{namespace: ns, name: name}
}

// settingsFeed hands the settings ConfigMap to the settings Source, and
// its decisions with the Node labels and the rollout to the Index (as a
// rollout.Plan, which the rollout Driver gets too). Without a Source it
// keeps the Options' Defaults; without a ConfigMap, the Source's flags.
type settingsFeed struct {
	src    *settings.Source
	driver *rollout.Driver // may be nil
	store  cache.Store     // nil without a ConfigMap
	key    string
	// base are the cluster's settings in use.
	base nodeview.Defaults
}

func newSettingsFeed(src *settings.Source, driver *rollout.Driver, store cache.Store, ref configMapRef) *settingsFeed {
	return &settingsFeed{src: src, driver: driver, store: store, key: ref.namespace + "/" + ref.name}
}

// initial returns the settings of the first views: flags when there is
// no ConfigMap to read.
func (f *settingsFeed) initial(flags nodeview.Defaults) nodeview.Defaults {
	if f.src == nil || f.store == nil {
		return flags
	}
	return f.src.Resolve(f.input())
}

// inUse tells the Source which settings the Index sends.
func (f *settingsFeed) inUse(ix *nodeview.Index) {
	if f.src != nil {
		f.src.InUse(ix.SettingsHash())
		f.src.NodesInUse(ix.NodeSettingsHash)
	}
}

// reread re-reads the ConfigMap, after it changed, into the cluster's
// settings in use.
func (f *settingsFeed) reread() {
	if f.src != nil && f.store != nil {
		f.base = f.src.Resolve(f.input())
	}
}

// loadBalancing is the cluster's default algorithm in the settings in
// use: it goes into service views (nodeview.Index.WithLoadBalancing),
// not into NodeConfigs.
func (f *settingsFeed) loadBalancing() string { return f.base.LoadBalancing }

// update returns the Index with the settings in use for every node:
// whether every node's NodeConfig changed, else the nodes whose did.
func (f *settingsFeed) update(ix *nodeview.Index, nodes map[string]*model.Node) (*nodeview.Index, bool, []string) {
	next, all, changed := f.plan(ix, f.base, nodes)
	f.inUse(next)
	return next, all, changed
}

// plan gives every node its settings: base, a rollout's where its
// progress reached, a Node label's mode.
func (f *settingsFeed) plan(ix *nodeview.Index, base nodeview.Defaults, nodes map[string]*model.Node) (*nodeview.Index, bool, []string) {
	f.base = base
	var spec *rollout.Spec
	var prog rollout.Progress
	var rv string
	if f.src != nil {
		spec, prog, rv = f.src.Rollout()
	}
	p := rollout.NewPlan(base, spec, prog, rv, nodes, settings.ParseMode)
	if f.driver != nil {
		f.driver.SetPlan(p)
	}
	return ix.WithSettings(p.Settings)
}

func (f *settingsFeed) input() settings.Input {
	cm, ok := get[*corev1.ConfigMap](f.store, f.key)
	if !ok {
		return settings.Input{}
	}
	return settings.Input{Exists: true, ResourceVersion: cm.ResourceVersion, Data: cm.Data,
		Progress: cm.Annotations[rollout.ProgressAnnotation]}
}

// mergeSorted returns the union of two sorted lists, sorted.
func mergeSorted(a, b []string) []string {
	if len(b) == 0 {
		return a
	}
	out := append(slices.Clone(a), b...)
	slices.Sort(out)
	return slices.Compact(out)
}
