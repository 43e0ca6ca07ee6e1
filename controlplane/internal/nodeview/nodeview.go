package nodeview

import (
	"iter"
	"slices"
	"strings"

	"github.com/switchyard-proxy/switchyard/controlplane/internal/cache"
)

// NodeView is everything one node must program: every service's view and
// the node's NodeConfig, each a named, versioned resource.
//
// It is compact: it points at the index's shared default set and at its
// zone's shared layer of zone views, and holds only the views that differ
// on this very node and its NodeConfig. A view is looked up in the node's
// own views, then the zone layer, then the defaults. Its system version is
// derived from the digests of the shared set and the zone layer, each
// computed once per Index, adjusted by the node's own views and config.
//
// A NodeView is immutable: an Index derived by Update never changes the
// NodeViews of the Index it came from. It is the cache.NodeView published
// for the node, as it is: no adapter, no copy.
type NodeView struct {
	name    string
	zone    string
	shared  *sharedSet
	layer   *layer  // nil when the zone has no view of its own
	own     []*View // in name order; the index's, shared
	config  *View
	version string
}

var _ cache.NodeView = (*NodeView)(nil)

// Name returns the node name.
func (nv *NodeView) Name() string { return nv.name }

// Zone returns the node's zone in the index's state; empty for a node
// without zone or unknown to the state. Pass it to Changes.ForNode.
func (nv *NodeView) Zone() string { return nv.zone }

// Version returns the system version: a content hash of the set of
// (name, version) pairs of all the node's resources, independent of order
// and of which views are shared. It equals SystemVersion over Range's
// pairs, and is the same in every process for the same content.
func (nv *NodeView) Version() string { return nv.version }

// Len returns the number of resources: one per service, plus the config.
func (nv *NodeView) Len() int { return len(nv.shared.views) + 1 }

// Config returns the node's NodeConfig resource.
func (nv *NodeView) Config() *View { return nv.config }

// Get returns the resource of that name.
func (nv *NodeView) Get(name string) (*cache.View, bool) {
	if v := nv.get(name); v != nil {
		return &v.View, true
	}
	return nil, false
}

// get returns the resource of that name, or nil.
func (nv *NodeView) get(name string) *View {
	if name == nv.config.Name {
		return nv.config
	}
	if v := findView(nv.own, name); v != nil {
		return v
	}
	if nv.layer != nil {
		if v := findView(nv.layer.views, name); v != nil {
			return v
		}
	}
	return nv.shared.byName(name)
}

// findView finds a view by name in views sorted by name.
func findView(views []*View, name string) *View {
	i, ok := slices.BinarySearchFunc(views, name, func(v *View, name string) int {
		return strings.Compare(v.Name, name)
	})
	if !ok {
		return nil
	}
	return views[i]
}

// Overrides returns, sorted, the names of the services whose view on this
// node differs from the shared default (by zone or by node).
func (nv *NodeView) Overrides() []string {
	names := make([]string, 0, len(nv.own))
	for _, v := range nv.own {
		names = append(names, v.Name)
	}
	if nv.layer != nil {
		for _, v := range nv.layer.views {
			names = append(names, v.Name)
		}
	}
	slices.Sort(names)
	return slices.Compact(names)
}

// Range calls f for every resource in name order until f returns false.
// It walks the defaults, the zone layer and the node's own views side by
// side, all three being in name order.
func (nv *NodeView) Range(f func(*cache.View) bool) {
	var zone []*View
	if nv.layer != nil {
		zone = nv.layer.views
	}
	own := nv.own
	pending := true // the config is still to be placed
	for _, v := range nv.shared.views {
		if pending && nv.config.Name < v.Name {
			if !f(&nv.config.View) {
				return
			}
			pending = false
		}
		zone = skipBefore(zone, v.Name)
		if len(zone) > 0 && zone[0].Name == v.Name {
			v, zone = zone[0], zone[1:]
		}
		own = skipBefore(own, v.Name)
		if len(own) > 0 && own[0].Name == v.Name {
			v, own = own[0], own[1:]
		}
		if !f(&v.View) {
			return
		}
	}
	if pending {
		f(&nv.config.View)
	}
}

// skipBefore drops the leading views named before name. Overrides always
// name a service of the shared set, so this drops nothing unless two
// services share a resource name.
func skipBefore(views []*View, name string) []*View {
	for len(views) > 0 && views[0].Name < name {
		views = views[1:]
	}
	return views
}

// All returns an iterator over the resources in name order.
func (nv *NodeView) All() iter.Seq[*cache.View] { return nv.Range }

// Pairs returns an iterator over the (name, version) pairs in name order.
func (nv *NodeView) Pairs() iter.Seq2[string, string] {
	return func(yield func(string, string) bool) {
		nv.Range(func(v *cache.View) bool { return yield(v.Name, v.Version) })
	}
}
