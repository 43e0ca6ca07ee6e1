package nodeview

import (
	"cmp"
	"maps"
	"slices"
	"strings"

	"github.com/switchyard-proxy/switchyard/controlplane/internal/model"
)

// Update returns the Index of st, derived from ix by recomputing only what
// the listed changes can affect, and what changed for each node.
//
// st is the caller's newest state. services must list every service whose
// Service object or EndpointSlices changed since the state ix was built
// from (added, changed or removed: a key st has no service for is a
// removal; a slice that moves between services changes both), and nodes
// every node whose Node object was added, changed or removed. Listing an
// unchanged key costs a recomputation and reports nothing.
//
// Update recomputes the listed services, and the services that read the
// zone of a listed node whose zone changed (ServiceViews.Nodes) and have
// zone hints (without them no view depends on a zone). Every other
// service, zone layer and node entry of ix is reused by pointer; the
// default set's digest is adjusted by the changed services alone. The
// sorted list of services, and the default set when a default changed,
// are copied (pointers only: no hashing, no encoding); see
// BenchmarkSpliceDefaults for what that costs.
//
// Update reads st only during the call and only reads ix: ix and every
// NodeView it gave out stay valid and unchanged, so readers may go on
// using them while and after Update runs. The caller may mutate st's maps
// once Update has returned (model values themselves are immutable).
func (ix *Index) Update(st *model.State, services []model.ServiceKey, nodes []string) (*Index, Changes) {
	if ix == nil {
		ix = NewIndex(nil, Options{})
	}
	if st == nil {
		st = model.NewState()
	}
	u := &updater{old: ix, st: st, ch: newChangeSet(), config: ix.config}
	u.controlPlanes(services)
	u.serviceRanges()
	keys := u.listedNodes(nodes, services)
	for i, sv := range compute(st, keys, ix.workers, ix.balance) {
		u.service(keys[i], ix.Service(keys[i]), sv)
	}
	next := u.apply()
	u.movedNodes(next)
	return next, u.ch.changes()
}

// updater gathers the edits of one Update, then applies them to copies.
type updater struct {
	old *Index
	st  *model.State
	// config is the new Index's config base: the old one, or a copy with
	// new control-plane addresses or service ranges (then ch.allConfigs
	// is set).
	config configBase
	edits  []svcEdit
	zones  map[string]*zoneEdit
	nodes  map[string]*nodeEdit
	moved  []move
	ch     *changeSet
}

// svcEdit replaces a service's views: old nil for an added service, new
// nil for a removed one.
type svcEdit struct {
	name     string
	key      model.ServiceKey
	old, new *ServiceViews
}

// zoneEdit is the edits of one zone layer: views to set or (nil) remove,
// and the change to the layer's delta.
type zoneEdit struct {
	views []namedView
	delta setDigest
}

type namedView struct {
	name string
	view *View // nil: remove
}

// nodeEdit is the edits of one node entry.
type nodeEdit struct {
	setNode bool // node and config replace the entry's
	node    *model.Node
	config  *View
	readers []svcEdit // new nil: the service no longer reads the node
}

// move is a node whose zone changed.
type move struct{ name, from, to string }

func (u *updater) nodeEdit(name string) *nodeEdit { return editOf(&u.nodes, name) }

func (u *updater) zoneEdit(zone string) *zoneEdit { return editOf(&u.zones, zone) }

// editOf returns the edit of key in *edits, adding an empty one (and the
// map, which stays nil while an update edits nothing there) if need be.
func editOf[E any](edits *map[string]*E, key string) *E {
	if *edits == nil {
		*edits = map[string]*E{}
	}
	e := (*edits)[key]
	if e == nil {
		e = new(E)
		(*edits)[key] = e
	}
	return e
}

// listedNodes records the listed nodes' new Node and NodeConfig and returns,
// sorted and without duplicates, the services to recompute: the listed
// ones and the zone-dependent readers of every node whose zone changed.
func (u *updater) listedNodes(names []string, services []model.ServiceKey) []model.ServiceKey {
	keys := slices.Clone(services)
	for _, name := range dedupe(names) {
		var was *model.Node
		var oldConfig *View
		e := u.old.entry(name)
		if e != nil {
			was, oldConfig = e.node, e.config
		}
		now := u.st.Nodes[name]
		if now == was {
			continue
		}
		ne := u.nodeEdit(name)
		ne.setNode, ne.node = true, now
		if now != nil {
			ne.config = u.config.nodeConfig(name, now)
		}
		if configVersion(u.old.config, name, oldConfig) != configVersion(u.config, name, ne.config) {
			u.ch.config = append(u.ch.config, name)
		}
		if from, to := zoneOf(was), zoneOf(now); from != to {
			u.moved = append(u.moved, move{name: name, from: from, to: to})
			if e != nil {
				for _, sv := range e.readers {
					if sv.zoned {
						keys = append(keys, sv.Key)
					}
				}
			}
		}
	}
	slices.SortFunc(keys, compareKeys)
	return slices.Compact(keys)
}

// configVersion is the version of a node's config; nil stands for the
// config base's config of a node the state does not know.
func configVersion(base configBase, name string, config *View) string {
	if config == nil {
		config = base.nodeConfig(name, nil)
	}
	return config.Version
}

func dedupe(names []string) []string {
	out := slices.Clone(names)
	slices.Sort(out)
	return slices.Compact(out)
}

// service records the edits that replace old with fresh, unless they are
// the same views.
func (u *updater) service(key model.ServiceKey, old, fresh *ServiceViews) {
	reuse(old, fresh)
	if sameViews(old, fresh) {
		return
	}
	e := svcEdit{name: text(key.String()), key: key, old: old, new: fresh}
	u.edits = append(u.edits, e)
	u.ch.service(e)
	var oldDefault, newDefault *View
	var oldZones, newZones map[string]*View
	if old != nil {
		oldDefault, oldZones = old.Default, old.ByZone
		for _, node := range old.Nodes {
			u.nodeEdit(node).readers = append(u.nodeEdit(node).readers, svcEdit{name: e.name, key: key})
		}
	}
	if fresh != nil {
		newDefault, newZones = fresh.Default, fresh.ByZone
		for _, node := range fresh.Nodes {
			u.nodeEdit(node).readers = append(u.nodeEdit(node).readers, svcEdit{name: e.name, key: key, new: fresh})
		}
	}
	// A zone layer is edited only where the zone's view or the default it
	// replaces changed (a layer's delta is relative to the default).
	for zone := range unionKeys(oldZones, newZones) {
		was, now := oldZones[zone], newZones[zone]
		if was == now && oldDefault == newDefault {
			continue
		}
		ze := u.zoneEdit(zone)
		if was != nil {
			ze.delta.sub(was.pair)
			ze.delta.add(oldDefault.pair)
			ze.views = append(ze.views, namedView{name: e.name})
		}
		if now != nil {
			ze.delta.add(now.pair)
			ze.delta.sub(newDefault.pair)
			ze.views = append(ze.views, namedView{name: e.name, view: now})
		}
	}
}

// reuse points fresh's views at old's wherever their versions are equal:
// an unchanged view keeps its identity, so the parts of the Index that
// hold it (the default set, zone layers, nodes' own views) need no copy,
// and NodeViews the caller does not replace share them with newer ones.
func reuse(old, fresh *ServiceViews) {
	if old == nil || fresh == nil {
		return
	}
	if fresh.Default.Version == old.Default.Version {
		fresh.Default = old.Default
	}
	for _, m := range [][2]map[string]*View{{old.ByZone, fresh.ByZone}, {old.ByNode, fresh.ByNode}} {
		for k, v := range m[1] {
			if o := m[0][k]; o != nil && o.Version == v.Version {
				m[1][k] = o
			}
		}
	}
}

// sameViews reports whether two computations of a service gave the same
// views: then the old ones are kept and nothing changes.
func sameViews(a, b *ServiceViews) bool {
	if a == nil || b == nil {
		return a == b
	}
	return a.Key == b.Key && a.zoned == b.zoned && a.Default.Version == b.Default.Version &&
		sameVersions(a.ByZone, b.ByZone) && sameVersions(a.ByNode, b.ByNode) &&
		slices.Equal(a.Nodes, b.Nodes)
}

func sameVersions(a, b map[string]*View) bool {
	return maps.EqualFunc(a, b, func(x, y *View) bool { return x.Version == y.Version })
}

// apply builds the new Index: the parts without edits are ix's.
func (u *updater) apply() *Index {
	old := u.old
	next := *old
	next.config = u.config
	if len(u.edits) > 0 {
		slices.SortFunc(u.edits, compareEdits)
		next.svcs = splice(old.svcs, u.edits, compareToEdit, func(e svcEdit) (*ServiceViews, bool) {
			return e.new, e.new != nil
		})
		next.shared = u.applyDefaults()
	}
	if len(u.zones) > 0 {
		next.zones = maps.Clone(old.zones)
		for zone, ze := range u.zones {
			applyZone(next.zones, zone, ze)
		}
	}
	if len(u.nodes) > 0 {
		next.nodes = u.applyNodes()
	}
	if u.ch.allConfigs {
		next.nodes = u.rebuildConfigs(next.nodes)
	}
	return &next
}

// applyDefaults returns the default set with the changed defaults
// swapped in, or the old one when no default changed.
func (u *updater) applyDefaults() *sharedSet {
	var edits []namedView
	digest := u.old.shared.digest
	for _, e := range u.edits { // sorted by name
		var was, now *View
		if e.old != nil {
			was = e.old.Default
		}
		if e.new != nil {
			now = e.new.Default
		}
		if was == now {
			continue
		}
		if was != nil {
			digest.sub(was.pair)
		}
		if now != nil {
			digest.add(now.pair)
		}
		edits = append(edits, namedView{name: e.name, view: now})
	}
	if len(edits) == 0 {
		return u.old.shared
	}
	return &sharedSet{digest: digest, views: spliceViews(u.old.shared.views, edits)}
}

// spliceViews applies edits, sorted by name and one per name, to views
// sorted by name.
func spliceViews(views []*View, edits []namedView) []*View {
	return splice(views, edits, func(v *View, e namedView) int {
		return strings.Compare(v.Name, e.name)
	}, func(e namedView) (*View, bool) { return e.view, e.view != nil })
}

// applyZone replaces one zone's layer in zones (a copy) by its edited copy.
func applyZone(zones map[string]*layer, zone string, ze *zoneEdit) {
	l := &layer{}
	if was := zones[zone]; was != nil {
		*l = *was
	}
	// A changed service has a removal (view nil) and then, if it still has
	// a view here, its new view under one name: the stable sort keeps that
	// order and lastPerName keeps the new view.
	slices.SortStableFunc(ze.views, func(a, b namedView) int { return strings.Compare(a.name, b.name) })
	l.views = spliceViews(l.views, lastPerName(ze.views))
	l.delta.add(ze.delta)
	if len(l.views) == 0 {
		delete(zones, zone)
		return
	}
	zones[zone] = l
}

// lastPerName keeps, of edits sorted by name, the last of each name.
func lastPerName(edits []namedView) []namedView {
	out := edits[:0]
	for i, e := range edits {
		if i+1 < len(edits) && edits[i+1].name == e.name {
			continue
		}
		out = append(out, e)
	}
	return out
}

// applyNodes returns a copy of the node entries with the edited ones
// replaced, added or (when they hold nothing) removed.
func (u *updater) applyNodes() []*nodeEntry {
	names := slices.Sorted(maps.Keys(u.nodes))
	entries := make([]*nodeEntry, len(names))
	for i, name := range names {
		ne := u.nodes[name]
		e := &nodeEntry{name: name}
		if was := u.old.entry(name); was != nil {
			*e = *was
		}
		if ne.setNode {
			e.node, e.config = ne.node, ne.config
		}
		if len(ne.readers) > 0 {
			slices.SortStableFunc(ne.readers, compareEdits)
			e.readers = splice(e.readers, lastPerKey(ne.readers), compareToEdit, func(r svcEdit) (*ServiceViews, bool) {
				return r.new, r.new != nil
			})
		}
		e.setOwn()
		if e.node != nil || len(e.readers) > 0 {
			entries[i] = e
		}
	}
	return splice(u.old.nodes, names, func(e *nodeEntry, name string) int { return strings.Compare(e.name, name) },
		func(name string) (*nodeEntry, bool) {
			i, _ := slices.BinarySearch(names, name)
			return entries[i], entries[i] != nil
		})
}

// lastPerKey keeps, of edits sorted by (name, key), the last of each key:
// a service that still reads a node has a removal then an addition there.
func lastPerKey(edits []svcEdit) []svcEdit {
	out := edits[:0]
	for i, e := range edits {
		if i+1 < len(edits) && compareEdits(edits[i+1], e) == 0 {
			continue
		}
		out = append(out, e)
	}
	return out
}

func compareEdits(a, b svcEdit) int {
	return cmp.Or(strings.Compare(a.name, b.name), compareKeys(a.key, b.key))
}

func compareToEdit(sv *ServiceViews, e svcEdit) int {
	return cmp.Or(strings.Compare(sv.Default.Name, e.name), compareKeys(sv.Key, e.key))
}

// splice returns a new slice: s, sorted by cmpEdit's order, with each
// edit applied in order. An edit replaces the element it compares equal
// to, or is inserted where it belongs; when value reports false the
// element is removed (or nothing inserted). edits must be sorted and
// unique in that order. s is not modified.
func splice[T, E any](s []T, edits []E, cmpEdit func(T, E) int, value func(E) (T, bool)) []T {
	out := make([]T, 0, len(s)+len(edits))
	i := 0
	for _, e := range edits {
		j, found := slices.BinarySearchFunc(s[i:], e, cmpEdit)
		out = append(out, s[i:i+j]...)
		i += j
		if found {
			i++
		}
		if v, ok := value(e); ok {
			out = append(out, v)
		}
	}
	return append(out, s[i:]...)
}
