package watch

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/cache"

	"github.com/switchyard-proxy/switchyard/controlplane/internal/nodeview"
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

// settingsFeed hands the settings ConfigMap to the settings Source and
// its decisions to the Index. Without a Source it keeps the Options'
// Defaults; without a ConfigMap, the Source's flags.
type settingsFeed struct {
	src   *settings.Source
	store cache.Store // nil without a ConfigMap
	key   string
}

func newSettingsFeed(src *settings.Source, store cache.Store, ref configMapRef) settingsFeed {
	return settingsFeed{src: src, store: store, key: ref.namespace + "/" + ref.name}
}

// initial returns the settings of the first views: flags when there is
// no ConfigMap to read.
func (f settingsFeed) initial(flags nodeview.Defaults) nodeview.Defaults {
	if f.src == nil || f.store == nil {
		return flags
	}
	return f.src.Resolve(f.input())
}

// inUse tells the Source which settings the Index sends.
func (f settingsFeed) inUse(ix *nodeview.Index) {
	if f.src != nil {
		f.src.InUse(ix.SettingsHash())
	}
}

// update re-reads the ConfigMap and returns the Index with its settings,
// and whether every node's NodeConfig changed.
func (f settingsFeed) update(ix *nodeview.Index) (*nodeview.Index, bool) {
	if f.src == nil || f.store == nil {
		return ix, false
	}
	next, all := ix.WithDefaults(f.src.Resolve(f.input()))
	f.inUse(next)
	return next, all
}

func (f settingsFeed) input() settings.Input {
	cm, ok := get[*corev1.ConfigMap](f.store, f.key)
	if !ok {
		return settings.Input{}
	}
	return settings.Input{Exists: true, ResourceVersion: cm.ResourceVersion, Data: cm.Data}
}
