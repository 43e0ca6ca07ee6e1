// Package watch is the control plane's one watch of the Kubernetes API:
// Service, EndpointSlice, Node and ServiceCIDR informers feed a
// Kubernetes-free model.State, which is turned into per-node views
// (package nodeview) and published to the cache that the gRPC servers
// stream from. ServiceCIDRs are watched only where the API serves them
// (discovery.go): an informer of an unserved resource never syncs.
// With a settings.Source naming a ConfigMap, that one object is watched
// too (settings.go): the first views wait for it, and a change of it
// goes through nodeview.Index.WithDefaults, one new NodeConfig per node.
//
//	informers ──events──▶ dirty keys ──batch──▶ translate ──▶ model.State
//	                                                         │ Index.Update(changed)
//	                                                         ▼
//	                               cache.Publish(node, view, changed names)
//
// Invariants:
//   - Event handlers only record keys; the loop reads the newest object
//     from the informer's store, so a burst of updates to one object costs
//     one translation, and a slow batch never builds a backlog.
//   - One goroutine (Run's loop) owns the model.State and the Index.
//   - Objects are stripped of managedFields and unused annotations before
//     they are cached, to keep the control plane's memory down.
//   - Only nodes whose view may have changed are published, with the names
//     that may have changed, so streams diff only those.
//   - A node's *nodeview.NodeView is published as it is (it is a
//     cache.NodeView): no adapter, no copy, no second encoding.
//   - A Publisher that is also a ServiceObserver (ObservedPublisher) hears
//     which services each update changed or removed before any of the
//     update's views is published (the fleet's programming latency counts
//     from then).
package watch
