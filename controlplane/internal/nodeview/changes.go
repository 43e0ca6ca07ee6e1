package nodeview

import "slices"

// Changes says which resources may differ between the NodeViews of the
// Index an Update started from and those of the Index it returned, so a
// caller re-sends only those. It is compact: a name that changed for
// every node is listed once, in Names or Removed, whatever the number of
// nodes.
//
// There are no false negatives: a resource whose version differs, or
// which appears or disappears, on some node is in ForNode for that node.
// There are few false positives: a name may be listed for a node whose
// view of it did not change (e.g. a service's default changed but the
// node has its own view of it).
//
// A caller may keep the old NodeView of a node ForNode names nothing for:
// it shares its default set, zone layer and views with the new one, so
// keeping it holds no memory the new Index does not.
type Changes struct {
	// Names are the services added, or whose default view changed: they
	// may differ on every node.
	Names []string
	// Removed are the services removed: gone from every node.
	Removed []string
	// Zones lists, by zone, services whose view changed for the nodes of
	// that zone (and not by Names).
	Zones map[string][]string
	// Nodes lists, by node, services whose view changed on that very node
	// (its own view, or it moved to another zone).
	Nodes map[string][]string
	// ConfigNodes are the nodes whose NodeConfig (the resource named as
	// the node) changed.
	ConfigNodes []string
	// AllConfigs says that every node's NodeConfig changed (a part they
	// share did: the advertised control-plane addresses or the service
	// ranges).
	AllConfigs bool
}

// Empty reports whether nothing changed on any node.
func (c Changes) Empty() bool {
	return len(c.Names) == 0 && len(c.Removed) == 0 && len(c.Zones) == 0 &&
		len(c.Nodes) == 0 && len(c.ConfigNodes) == 0 && !c.AllConfigs
}

// ForNode returns, sorted, the names of the resources that may have
// changed on a node whose zone (in the new state) is zone: Names,
// Removed, Zones[zone], Nodes[name], and the node's own name when its
// NodeConfig changed (ConfigNodes or AllConfigs). A name absent from the node's new NodeView was
// removed. It returns nil when nothing changed for the node; the slice is
// new and the caller's to keep.
func (c Changes) ForNode(name, zone string) []string {
	n := len(c.Names) + len(c.Removed) + len(c.Nodes[name]) + 1
	if zone != "" {
		n += len(c.Zones[zone])
	}
	out := make([]string, 0, n)
	out = append(out, c.Names...)
	out = append(out, c.Removed...)
	if zone != "" {
		out = append(out, c.Zones[zone]...)
	}
	out = append(out, c.Nodes[name]...)
	if _, ok := slices.BinarySearch(c.ConfigNodes, name); ok || c.AllConfigs {
		out = append(out, name)
	}
	if len(out) == 0 {
		return nil
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// changeSet accumulates Changes; lists may hold duplicates until changes.
type changeSet struct {
	names, removed, config []string
	zones, nodes           map[string][]string
	allConfigs             bool
}

func newChangeSet() *changeSet {
	return &changeSet{zones: map[string][]string{}, nodes: map[string][]string{}}
}

// service records what replacing e.old by e.new changes. A change of the
// default view is reported for every node, which covers its zone and node
// views too; otherwise each zone and node view that appeared, disappeared
// or changed is reported for its zone or node.
func (c *changeSet) service(e svcEdit) {
	switch {
	case e.new == nil:
		c.removed = append(c.removed, e.name)
		return
	case e.old == nil || e.old.Default.Version != e.new.Default.Version:
		c.names = append(c.names, e.name)
		return
	}
	for zone := range unionKeys(e.old.ByZone, e.new.ByZone) {
		if !sameView(e.old.ByZone[zone], e.new.ByZone[zone]) {
			c.zones[zone] = append(c.zones[zone], e.name)
		}
	}
	for node := range unionKeys(e.old.ByNode, e.new.ByNode) {
		if !sameView(e.old.ByNode[node], e.new.ByNode[node]) {
			c.nodes[node] = append(c.nodes[node], e.name)
		}
	}
}

func unionKeys[V any](a, b map[string]V) map[string]struct{} {
	out := make(map[string]struct{}, len(a)+len(b))
	for k := range a {
		out[k] = struct{}{}
	}
	for k := range b {
		out[k] = struct{}{}
	}
	return out
}

// sameView reports whether two optional views are both absent or have the
// same version.
func sameView(a, b *View) bool {
	if a == nil || b == nil {
		return a == b
	}
	return a.Version == b.Version
}

// movedNodes reports, for every node whose zone changed, the services
// whose inherited view changed: those in its old zone's layer (in the old
// Index) or its new zone's layer (in next), compared by walking both
// layers in name order. Its own views were recomputed if they depend on
// zones, and are reported by service.
func (u *updater) movedNodes(next *Index) {
	for _, m := range u.moved {
		was, now := u.old.layerViews(m.from), next.layerViews(m.to)
		for len(was) > 0 || len(now) > 0 {
			var name string
			var a, b *View // the views inherited before and after, nil: none
			switch {
			case len(now) == 0 || (len(was) > 0 && was[0].Name < now[0].Name):
				name, a, was = was[0].Name, was[0], was[1:]
				b = next.shared.byName(name)
			case len(was) == 0 || now[0].Name < was[0].Name:
				name, b, now = now[0].Name, now[0], now[1:]
				a = u.old.shared.byName(name)
			default:
				name, a, b, was, now = was[0].Name, was[0], now[0], was[1:], now[1:]
			}
			if !sameView(a, b) {
				u.ch.nodes[m.name] = append(u.ch.nodes[m.name], name)
			}
		}
	}
}

// changes returns the accumulated Changes, every list sorted and without
// duplicates.
func (c *changeSet) changes() Changes {
	out := Changes{Names: sortedSet(c.names), Removed: sortedSet(c.removed), ConfigNodes: sortedSet(c.config), AllConfigs: c.allConfigs}
	if len(c.zones) > 0 {
		out.Zones = make(map[string][]string, len(c.zones))
		for zone, names := range c.zones {
			out.Zones[zone] = sortedSet(names)
		}
	}
	if len(c.nodes) > 0 {
		out.Nodes = make(map[string][]string, len(c.nodes))
		for node, names := range c.nodes {
			out.Nodes[node] = sortedSet(names)
		}
	}
	return out
}

func sortedSet(s []string) []string {
	if len(s) == 0 {
		return nil
	}
	slices.Sort(s)
	return slices.Compact(s)
}
