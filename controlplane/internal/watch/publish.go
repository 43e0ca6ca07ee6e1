package watch

import (
	"slices"
	"time"

	cpcache "github.com/switchyard-proxy/switchyard/controlplane/internal/cache"
	"github.com/switchyard-proxy/switchyard/controlplane/internal/fleetlatency"
	"github.com/switchyard-proxy/switchyard/controlplane/internal/model"
	"github.com/switchyard-proxy/switchyard/controlplane/internal/nodeview"
)

// Publisher is where node views go: the stream cache. A *nodeview.NodeView
// is published as it is: it is a cache.NodeView.
type Publisher interface {
	Publish(node string, nv cpcache.NodeView, changed []string)
	Remove(node string)
}

var _ Publisher = (*cpcache.Cache)(nil)

// ServiceObserver learns, once per update and before its views are
// published, which services the update changed and which it removed, and
// the trigger times the changes carry; *fleetlatency.Tracker implements
// it. A Publisher that implements it too (ObservedPublisher) is told.
type ServiceObserver interface {
	ServicesChanged(changed, removed []string, triggers map[string]fleetlatency.Trigger)
}

// ObservedPublisher publishes to Publisher and tells Services which
// services each update changed.
type ObservedPublisher struct {
	Publisher
	Services ServiceObserver
}

// ServicesChanged tells Services.
func (p ObservedPublisher) ServicesChanged(changed, removed []string, triggers map[string]fleetlatency.Trigger) {
	p.Services.ServicesChanged(changed, removed, triggers)
}

// publisher publishes an Index's node views, node by node.
type publisher struct {
	to       Publisher
	services ServiceObserver // nil: none
}

func newPublisher(to Publisher) publisher {
	p := publisher{to: to}
	p.services, _ = to.(ServiceObserver)
	return p
}

// all publishes every known node's view with unknown changes.
func (p publisher) all(ix *nodeview.Index, st *model.State) {
	for name := range st.Nodes {
		p.to.Publish(name, ix.Node(name), nil)
	}
}

// changed publishes the nodes whose view may have changed, each with the
// names that may have changed, and removes deleted nodes. triggers are
// the trigger times of the update's slice changes, by service.
func (p publisher) changed(ix *nodeview.Index, st *model.State, ch nodeview.Changes, nodes []string,
	triggers map[model.ServiceKey][]time.Time) {
	if p.services != nil {
		// Every update, even one that changed no service: it is a new
		// generation for the views it publishes (fleetlatency).
		changed := changedServices(ch, st)
		p.services.ServicesChanged(changed, ch.Removed, serviceTriggers(ch, triggers))
	}
	for _, name := range nodes {
		if _, ok := st.Nodes[name]; !ok {
			p.to.Remove(name)
		}
	}
	for name, node := range st.Nodes {
		names := ch.ForNode(name, node.Zone)
		if len(names) == 0 {
			continue
		}
		p.to.Publish(name, ix.Node(name), names)
	}
}

// changedServices lists, sorted and once each, the services whose view
// changed on some node of st: for every node, for a zone's or for one node
// (not for a node deleted). NodeConfigs are not services.
func changedServices(ch nodeview.Changes, st *model.State) []string {
	n := len(ch.Names)
	for _, names := range ch.Zones {
		n += len(names)
	}
	for node, names := range ch.Nodes {
		if _, ok := st.Nodes[node]; ok {
			n += len(names)
		}
	}
	if n == 0 {
		return nil
	}
	out := make([]string, 0, n)
	out = append(out, ch.Names...)
	for _, names := range ch.Zones {
		out = append(out, names...)
	}
	for node, names := range ch.Nodes {
		if _, ok := st.Nodes[node]; ok {
			out = append(out, names...)
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// serviceTriggers names each service's trigger times as its resource, with
// the nodes the change reached when it reached only some nodes' own views:
// a change of the default view or of a zone's reaches every node (zones
// are not told apart).
func serviceTriggers(ch nodeview.Changes, triggers map[model.ServiceKey][]time.Time) map[string]fleetlatency.Trigger {
	if len(triggers) == 0 {
		return nil
	}
	out := make(map[string]fleetlatency.Trigger, len(triggers))
	for k, times := range triggers {
		out[k.String()] = fleetlatency.Trigger{Times: times}
	}
	wide := map[string]bool{}
	for _, name := range ch.Names {
		wide[name] = true
	}
	for _, names := range ch.Zones {
		for _, name := range names {
			wide[name] = true
		}
	}
	reached := map[string][]string{}
	for node, names := range ch.Nodes {
		for _, name := range names {
			if _, ok := out[name]; ok && !wide[name] {
				reached[name] = append(reached[name], node)
			}
		}
	}
	for name, nodes := range reached {
		tr := out[name]
		tr.Nodes = nodes
		out[name] = tr
	}
	return out
}
