package watch

import (
	"sync"

	"github.com/switchyard-proxy/switchyard/controlplane/internal/model"
)

// dirty collects the keys of objects changed since the loop last looked.
// Handlers add; the loop takes the whole set at once. Keys, not objects:
// the loop reads each object's newest state from its informer's store.
type dirty struct {
	mu       sync.Mutex
	services map[model.ServiceKey]struct{}
	slices   map[model.SliceKey]struct{}
	nodes    map[string]struct{}
	// serviceCIDRs are ServiceCIDR object names.
	serviceCIDRs map[string]struct{}
	// configMap: the settings ConfigMap changed (there is only one).
	configMap bool
	wake      chan struct{}
}

func newDirty() *dirty {
	d := &dirty{wake: make(chan struct{}, 1)}
	d.reset()
	return d
}

func (d *dirty) reset() {
	d.services = map[model.ServiceKey]struct{}{}
	d.slices = map[model.SliceKey]struct{}{}
	d.nodes = map[string]struct{}{}
	d.serviceCIDRs = map[string]struct{}{}
	d.configMap = false
}

func (d *dirty) addService(k model.ServiceKey) { d.add(func() { d.services[k] = struct{}{} }) }
func (d *dirty) addSlice(k model.SliceKey)     { d.add(func() { d.slices[k] = struct{}{} }) }
func (d *dirty) addNode(name string)           { d.add(func() { d.nodes[name] = struct{}{} }) }
func (d *dirty) addServiceCIDR(name string) {
	d.add(func() { d.serviceCIDRs[name] = struct{}{} })
}

func (d *dirty) addConfigMap() { d.add(func() { d.configMap = true }) }

func (d *dirty) add(f func()) {
	d.mu.Lock()
	f()
	d.mu.Unlock()
	select {
	case d.wake <- struct{}{}:
	default:
	}
}

// batch is one round of changed keys.
type batch struct {
	services     map[model.ServiceKey]struct{}
	slices       map[model.SliceKey]struct{}
	nodes        map[string]struct{}
	serviceCIDRs map[string]struct{}
	configMap    bool
}

func (b batch) empty() bool {
	return len(b.services) == 0 && len(b.slices) == 0 && len(b.nodes) == 0 && len(b.serviceCIDRs) == 0 && !b.configMap
}

func (d *dirty) take() batch {
	d.mu.Lock()
	defer d.mu.Unlock()
	b := batch{services: d.services, slices: d.slices, nodes: d.nodes, serviceCIDRs: d.serviceCIDRs, configMap: d.configMap}
	d.reset()
	return b
}
