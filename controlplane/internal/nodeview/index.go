package nodeview

import (
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/switchyard-proxy/switchyard/controlplane/internal/model"
)

// Options configure an Index.
type Options struct {
	// Defaults go into every node's NodeConfig.
	Defaults Defaults
	// Workers bounds the goroutines that compute services; 0 means
	// GOMAXPROCS. The result does not depend on it.
	Workers int
}

// Index holds every service's views for one State, computed once, and
// hands out node views that share them. An Index is immutable once built
// and safe for concurrent use.
type Index struct {
	state    *model.State
	config   configBase
	services map[model.ServiceKey]*ServiceViews
	shared   *sharedSet
	// zones holds, per zone, the views that differ from the defaults for
	// every node of that zone: built once, shared by the zone's nodes.
	zones map[string]*layer
	// byNode lists, per node, the services with a view of its own there,
	// in name order.
	byNode map[string][]*ServiceViews
}

// layer is a set of views that replace defaults, with the change it makes
// to a digest.
type layer struct {
	views map[string]*View
	delta setDigest
}

// sharedSet is the default view of every service, in name order, with its
// digest: what a node with no override receives, hashed once.
type sharedSet struct {
	views  []*View
	byName map[string]*View
	digest setDigest
}

// NewIndex computes the views of every service of st. st must not change
// while the Index is in use (model values are immutable by contract).
func NewIndex(st *model.State, opts Options) *Index {
	if st == nil {
		st = model.NewState()
	}
	ix := &Index{
		state:    st,
		config:   newConfigBase(opts.Defaults),
		services: make(map[model.ServiceKey]*ServiceViews, len(st.Services)),
		zones:    map[string]*layer{},
		byNode:   map[string][]*ServiceViews{},
	}
	all := computeAll(st, opts.Workers)
	shared := &sharedSet{
		views:  make([]*View, len(all)),
		byName: make(map[string]*View, len(all)),
	}
	for i, sv := range all {
		ix.services[sv.Key] = sv
		shared.views[i] = sv.Default
		shared.byName[sv.Default.Name] = sv.Default
		shared.digest.add(sv.Default.pair)
		for zone, v := range sv.ByZone {
			l := ix.zones[zone]
			if l == nil {
				l = &layer{views: map[string]*View{}}
				ix.zones[zone] = l
			}
			l.views[v.Name] = v
			l.delta.add(v.pair)
			l.delta.sub(sv.Default.pair)
		}
		for node := range sv.ByNode {
			ix.byNode[node] = append(ix.byNode[node], sv)
		}
	}
	ix.shared = shared
	return ix
}

// computeAll runs Service for every service of st, in parallel, and returns
// the results in resource-name order.
func computeAll(st *model.State, workers int) []*ServiceViews {
	type named struct {
		name string
		key  model.ServiceKey
	}
	keys := make([]named, 0, len(st.Services))
	for k, svc := range st.Services {
		if svc != nil {
			keys = append(keys, named{name: text(k.String()), key: k})
		}
	}
	// Resource-name order ("ns/name" as a string), which is not the order
	// of (namespace, name) pairs: "a-b/x" < "a/x".
	slices.SortFunc(keys, func(a, b named) int { return strings.Compare(a.name, b.name) })
	out := make([]*ServiceViews, len(keys))
	if workers <= 0 {
		workers = runtime.GOMAXPROCS(0)
	}
	workers = min(workers, max(1, len(keys)/64))
	var next atomic.Int64
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for {
				i := int(next.Add(1)) - 1
				if i >= len(keys) {
					return
				}
				k := keys[i].key
				out[i] = Service(st.Services[k], st.Slices[k], st.Nodes)
			}
		})
	}
	wg.Wait()
	return out
}

// Service returns the views of one service, or nil if the state has no
// such service.
func (ix *Index) Service(key model.ServiceKey) *ServiceViews {
	return ix.services[key]
}

// Len returns the number of services.
func (ix *Index) Len() int { return len(ix.shared.views) }

// Node returns the view of one node. A node the state does not know gets
// the default views (plus any view kept for its name, e.g. endpoints that
// already name it) and a NodeConfig with its name and the defaults.
//
// The NodeView points at the shared default set; it holds only the node's
// overrides and NodeConfig, so its cost is independent of the number of
// services without a view of their own on the node.
func (ix *Index) Node(name string) *NodeView {
	node := ix.state.Nodes[name]
	zone := ""
	if node != nil {
		zone = node.Zone
	}
	nv := &NodeView{
		name:   name,
		shared: ix.shared,
		config: ix.config.nodeConfig(name, node),
	}
	d := ix.shared.digest
	if l := ix.zones[zone]; zone != "" && l != nil {
		nv.zone = l
		d.add(l.delta)
	}
	if own := ix.byNode[name]; len(own) > 0 {
		nv.own = make(map[string]*View, len(own))
		for _, sv := range own {
			v := sv.ByNode[name]
			d.sub(nv.inherited(v.Name).pair)
			d.add(v.pair)
			nv.own[v.Name] = v
		}
	}
	d.add(nv.config.pair)
	nv.version = d.version(nv.Len())
	return nv
}

// Compute is the one-shot form: the view of one node of st, with default
// options. Callers serving many nodes build one Index instead.
func Compute(st *model.State, node string) *NodeView {
	return NewIndex(st, Options{}).Node(node)
}
