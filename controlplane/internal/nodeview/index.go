package nodeview

import (
	"cmp"
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
	// AdvertiseService is the control plane's own Service: the ready
	// endpoints of its EndpointSlices, on their port named GRPCPortName,
	// become every NodeConfig's control_plane_addresses. The zero key
	// advertises nothing.
	AdvertiseService model.ServiceKey
}

// Index holds every service's views for one State, computed once, and
// hands out node views that share them. An Index is immutable once built
// and safe for concurrent use; Update derives a new Index and leaves this
// one, and every NodeView it handed out, valid and unchanged.
//
// An Index keeps no reference to the State it was built from, only to
// model values (which are immutable): the caller may go on mutating the
// State's maps once NewIndex or Update has returned.
//
// Every part is stored so that Update can copy it on write cheaply:
// sorted slices of pointers rather than large maps.
type Index struct {
	config  configBase
	workers int
	// balance is the cluster's default algorithm (Defaults.LoadBalancing)
	// for services whose annotation names none.
	balance string
	// advertise is Options.AdvertiseService.
	advertise model.ServiceKey
	// svcs are every service's views in resource-name order.
	svcs []*ServiceViews
	// shared are their defaults, which NodeViews point at. It is replaced
	// only when a default view changes, so a node Changes does not name
	// keeps sharing it with the newer Index.
	shared *sharedSet
	// zones holds, per zone, the views that differ from the defaults for
	// every node of that zone: built once, shared by the zone's nodes.
	zones map[string]*layer
	// nodes are the nodes of the state and the nodes some service read,
	// by name.
	nodes []*nodeEntry
}

// sharedSet is every service's default view in resource-name order, with
// their digest: what a node with no override receives, hashed once.
type sharedSet struct {
	views  []*View
	digest setDigest
}

// layer is a set of views, in name order, that replace defaults, with the
// change it makes to a digest.
type layer struct {
	views []*View
	delta setDigest
}

// nodeEntry is what the index knows about one node name.
type nodeEntry struct {
	name string
	// node is nil for a name the state has no Node for.
	node *model.Node
	// config is the NodeConfig of a known node, built once; nil when node
	// is nil (Node then builds the config of an unknown node).
	config *View
	// readers are the services whose ServiceViews.Nodes list this node,
	// in resource-name order: the only services that may have a view of
	// their own on it, and those to recompute when it changes.
	readers []*ServiceViews
	// own are the readers' views of this very node (ByNode), in name
	// order, and ownDelta what swapping them for the views the node would
	// inherit in its zone does to a digest. Both are derived from readers
	// and the zone by setOwn, whenever either changes.
	own      []*View
	ownDelta setDigest
}

func (e *nodeEntry) zone() string { return zoneOf(e.node) }

// setOwn derives own and ownDelta from readers and the node's zone.
func (e *nodeEntry) setOwn() {
	e.own, e.ownDelta = nil, setDigest{}
	zone := e.zone()
	for _, sv := range e.readers {
		v, ok := sv.ByNode[e.name]
		if !ok {
			continue
		}
		e.ownDelta.sub(sv.inherited(zone).pair)
		e.ownDelta.add(v.pair)
		e.own = append(e.own, v) // in name order, as readers are
	}
}

func zoneOf(n *model.Node) string {
	if n == nil {
		return ""
	}
	return n.Zone
}

// NewIndex computes the views of every service of st. It reads st only
// during the call.
func NewIndex(st *model.State, opts Options) *Index {
	if st == nil {
		st = model.NewState()
	}
	ix := &Index{
		config:    newConfigBase(Settings{Defaults: opts.Defaults}),
		workers:   opts.Workers,
		balance:   opts.Defaults.LoadBalancing,
		advertise: opts.AdvertiseService,
		zones:     map[string]*layer{},
	}
	ix.config.controlPlanes = advertised(st, opts.AdvertiseService)
	ix.config.serviceCIDRs = serviceCIDRs(st)
	keys := make([]model.ServiceKey, 0, len(st.Services))
	for k, svc := range st.Services {
		if svc != nil {
			keys = append(keys, k)
		}
	}
	all := compute(st, keys, opts.Workers, ix.balance)
	slices.SortFunc(all, compareViews)
	ix.svcs = all
	shared := &sharedSet{views: make([]*View, len(all))}
	readers := map[string][]*ServiceViews{}
	for i, sv := range all {
		shared.views[i] = sv.Default
		shared.digest.add(sv.Default.pair)
		for zone, v := range sv.ByZone {
			l := ix.zones[zone]
			if l == nil {
				l = &layer{}
				ix.zones[zone] = l
			}
			l.views = append(l.views, v) // in name order, as all is
			l.delta.add(v.pair)
			l.delta.sub(sv.Default.pair)
		}
		for _, node := range sv.Nodes {
			readers[node] = append(readers[node], sv)
		}
	}
	ix.shared = shared
	ix.nodes = make([]*nodeEntry, 0, len(st.Nodes)+len(readers))
	for name, n := range st.Nodes {
		if n != nil {
			ix.nodes = append(ix.nodes, &nodeEntry{name: name, node: n, config: ix.config.nodeConfig(name, n), readers: readers[name]})
		}
	}
	for name, r := range readers {
		if st.Nodes[name] == nil {
			ix.nodes = append(ix.nodes, &nodeEntry{name: name, readers: r})
		}
	}
	for _, e := range ix.nodes {
		e.setOwn()
	}
	slices.SortFunc(ix.nodes, func(a, b *nodeEntry) int { return strings.Compare(a.name, b.name) })
	return ix
}

// compareViews orders services by resource name ("ns/name" as a string,
// which is not the order of (namespace, name) pairs: "a-b/x" < "a/x"),
// then by key, so that the order never depends on map order.
func compareViews(a, b *ServiceViews) int {
	return cmp.Or(strings.Compare(a.Default.Name, b.Default.Name), compareKeys(a.Key, b.Key))
}

func compareKeys(a, b model.ServiceKey) int {
	return cmp.Or(strings.Compare(a.Namespace, b.Namespace), strings.Compare(a.Name, b.Name))
}

// compute runs Service for each key of st, with balance as the default
// algorithm, in parallel when there are many, and returns the results in
// the keys' order (nil for a key st has no service for).
func compute(st *model.State, keys []model.ServiceKey, workers int, balance string) []*ServiceViews {
	out := make([]*ServiceViews, len(keys))
	if workers <= 0 {
		workers = runtime.GOMAXPROCS(0)
	}
	workers = min(workers, max(1, len(keys)/64))
	if workers == 1 {
		for i, k := range keys {
			out[i] = serviceViews(st.Services[k], st.Slices[k], st.Nodes, balance)
		}
		return out
	}
	var next atomic.Int64
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for {
				i := int(next.Add(1)) - 1
				if i >= len(keys) {
					return
				}
				k := keys[i]
				out[i] = serviceViews(st.Services[k], st.Slices[k], st.Nodes, balance)
			}
		})
	}
	wg.Wait()
	return out
}

// Service returns the views of one service, or nil if the state has no
// such service.
func (ix *Index) Service(key model.ServiceKey) *ServiceViews {
	t := nameKey{text(key.String()), key}
	i, ok := slices.BinarySearchFunc(ix.svcs, t, func(sv *ServiceViews, t nameKey) int {
		return cmp.Or(strings.Compare(sv.Default.Name, t.name), compareKeys(sv.Key, t.key))
	})
	if !ok {
		return nil
	}
	return ix.svcs[i]
}

type nameKey struct {
	name string
	key  model.ServiceKey
}

// byName returns the default view of the first service of that name.
func (s *sharedSet) byName(name string) *View {
	i, _ := slices.BinarySearchFunc(s.views, name, func(v *View, name string) int {
		return strings.Compare(v.Name, name)
	})
	if i < len(s.views) && s.views[i].Name == name {
		return s.views[i]
	}
	return nil
}

// entry returns what the index knows about a node, or nil.
func (ix *Index) entry(name string) *nodeEntry {
	i, ok := slices.BinarySearchFunc(ix.nodes, name, func(e *nodeEntry, name string) int {
		return strings.Compare(e.name, name)
	})
	if !ok {
		return nil
	}
	return ix.nodes[i]
}

// layerViews returns the views of a zone's layer, nil for none.
func (ix *Index) layerViews(zone string) []*View {
	if l := ix.zones[zone]; l != nil {
		return l.views
	}
	return nil
}

// Len returns the number of services.
func (ix *Index) Len() int { return len(ix.svcs) }

// Node returns the view of one node. A node the state does not know gets
// the default views (plus any view kept for its name, e.g. endpoints that
// already name it) and a NodeConfig with its name and the defaults.
//
// The NodeView points at the shared default set, its zone's layer and
// the node's own views and NodeConfig, all prepared by NewIndex or Update:
// Node costs one hash (the system version), whatever the number of
// services.
func (ix *Index) Node(name string) *NodeView {
	e := ix.entry(name)
	nv := &NodeView{name: name, shared: ix.shared}
	if e != nil {
		nv.zone, nv.config = e.zone(), e.config
	}
	if nv.config == nil {
		nv.config = ix.config.nodeConfig(name, nil)
	}
	d := ix.shared.digest
	if l := ix.zones[nv.zone]; nv.zone != "" && l != nil {
		nv.layer = l
		d.add(l.delta)
	}
	if e != nil {
		nv.own = e.own
		d.add(e.ownDelta)
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
