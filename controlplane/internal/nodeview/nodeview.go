package nodeview

import (
	"iter"
	"slices"
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
type NodeView struct {
	name    string
	shared  *sharedSet
	zone    *layer // nil when the zone has no view of its own
	own     map[string]*View
	config  *View
	version string
}

// inherited returns the view of a service the node would have without its
// own views: the zone's, or the default.
func (nv *NodeView) inherited(name string) *View {
	if nv.zone != nil {
		if v, ok := nv.zone.views[name]; ok {
			return v
		}
	}
	return nv.shared.byName[name]
}

// Name returns the node name.
func (nv *NodeView) Name() string { return nv.name }

// Version returns the system version: a content hash of the set of
// (name, version) pairs of all the node's resources, independent of order
// and of which views are shared. It equals SystemVersion over Range's
// pairs, and is the same in every process for the same content.
func (nv *NodeView) Version() string { return nv.version }

// Len returns the number of resources: one per service, plus the config.
func (nv *NodeView) Len() int { return len(nv.shared.views) + 1 }

// Config returns the node's NodeConfig resource.
func (nv *NodeView) Config() *View { return nv.config }

// Get returns the resource of that name, or nil.
func (nv *NodeView) Get(name string) *View {
	if name == nv.config.Name {
		return nv.config
	}
	if v, ok := nv.own[name]; ok {
		return v
	}
	return nv.inherited(name)
}

// Overrides returns, sorted, the names of the services whose view on this
// node differs from the shared default (by zone or by node).
func (nv *NodeView) Overrides() []string {
	names := make([]string, 0, len(nv.own))
	for name := range nv.own {
		names = append(names, name)
	}
	if nv.zone != nil {
		for name := range nv.zone.views {
			if _, dup := nv.own[name]; !dup {
				names = append(names, name)
			}
		}
	}
	slices.Sort(names)
	return names
}

// Range calls f for every resource in name order until f returns false.
func (nv *NodeView) Range(f func(*View) bool) {
	pending := true // the config is still to be placed
	for _, v := range nv.shared.views {
		if pending && nv.config.Name < v.Name {
			if !f(nv.config) {
				return
			}
			pending = false
		}
		if nv.zone != nil {
			if o, ok := nv.zone.views[v.Name]; ok {
				v = o
			}
		}
		if o, ok := nv.own[v.Name]; ok {
			v = o
		}
		if !f(v) {
			return
		}
	}
	if pending {
		f(nv.config)
	}
}

// All returns an iterator over the resources in name order.
func (nv *NodeView) All() iter.Seq[*View] { return nv.Range }

// Pairs returns an iterator over the (name, version) pairs in name order.
func (nv *NodeView) Pairs() iter.Seq2[string, string] {
	return func(yield func(string, string) bool) {
		nv.Range(func(v *View) bool { return yield(v.Name, v.Version) })
	}
}
