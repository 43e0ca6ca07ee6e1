// Package nodeview is the pure heart of the control plane: from a
// model.State it computes what each node must program, as named, versioned
// resources ready to send, and keeps them up to date change by change.
//
// # Role
//
// Service computes every variant of one service's view at once (a Default
// for most nodes, plus ByZone and ByNode views only where the view really
// differs). NewIndex runs Service for every service of a State and
// Index.Node assembles one node's NodeView: every service view plus the
// node's NodeConfig. Index.Update derives the Index of a newer State by
// recomputing only what changed, and says which resources changed for
// which nodes (Changes). Compute is the one-shot form.
//
// # Endpoint selection
//
// Selection follows upstream kube-proxy (pkg/proxy endpointslicecache.go
// and topology.go, CategorizeEndpoints), done once here instead of on
// every node:
//   - slices of a family the service has no cluster IP for are ignored;
//   - an endpoint serves service port P only if its slice has a port of
//     P's name and protocol, whose number is the target port; selection
//     is per service port, and each chosen endpoint is listed once with
//     exactly the ports it was chosen for;
//   - an endpoint is an address and a target port, as upstream's
//     "ip:port": one address that two slices give two target ports for
//     one service port is two endpoints (sent as two Endpoint messages,
//     since a message lists a port name once);
//   - duplicates of an address and target port (per service port) are
//     merged: a non-terminating entry wins over a terminating one, then a
//     ready one over a non-ready one, then the first in slice-name order;
//   - the cluster set is filled when internal traffic is under the Cluster
//     policy, or external traffic is, for an externally reachable service
//     (a node port, an external IP or a load-balancer IP: upstream's
//     ExternallyAccessible). The model's external policy is Cluster for a
//     service that is not reachable, so an internal-Local ClusterIP
//     service has no cluster set, while an internal-Local NodePort with
//     external policy Cluster has every endpoint there;
//   - the local set is filled when either policy is Local (the external
//     one only for a reachable service), and is_local is set only then;
//   - each set holds its ready endpoints or, when it has none, its
//     serving-terminating ones (the cluster set looks at every endpoint,
//     the local set at the node's own);
//   - topology hints (forNodes, then forZones) restrict the cluster set
//     only when every ready endpoint of the port carries them and one
//     names this node (or its zone); they never restrict the local set.
//     spec.trafficDistribution itself is not read, as upstream does not:
//     the EndpointSlice controller turns it into hints;
//   - each ServicePort's has_any_endpoints is true when some endpoint of
//     that port is ready, or serving and terminating: upstream's
//     hasAnyEndpoints, decided per service port as upstream does, and the
//     same on every node. It is always set, false included, so agents
//     know the view decides per port; the view's has_any_endpoints is the
//     OR over ports, for agents older than the per-port field.
//
// One difference from upstream is forced by the shape of the API.
// Upstream also computes the cluster set when both policies are Local and
// the service is externally reachable, to short-circuit traffic from pods
// and from the node to its external addresses; switchyard.v1 routes all
// traffic by the two policies, so that set is not sent. Which sets a view
// carries is decided per service (a service is reachable if any port has
// a node port, where upstream asks per port); that only ever sends a set
// a port does not use, and agents decide reachability per port.
//
// # Invariants
//
// Purity: nothing here does I/O, reads a clock or depends on map order or
// on the number of workers. The same State gives the same bytes and the
// same versions in every process, so control-plane replicas agree; an
// Index built by Updates gives every node the same views and versions as
// NewIndex on the final State.
//
// Sharing: a service whose view is the same on every node (no Local
// policy, no topology) has exactly one View, built, marshalled and hashed
// once; a node that hosts no endpoint of a Local-policy service shares the
// service's "no local endpoints" Default, and equal variants are one View.
// A NodeView holds a pointer to the index's shared default set, a pointer
// to its zone's shared layer of zone views (topology hints), and pointers
// to its own views and NodeConfig, prepared once per Index: never a copy
// of the shared views.
//
// Encoding: this is the one place a resource becomes bytes. Each View is
// encoded once, straight into the deterministic wire form of its Resource,
// and handed on as it is: a View is the cache.View the servers send (plus
// its share of a system version) and a NodeView the cache.NodeView the
// watch publishes, with no adapter and no second encoding. A View keeps
// only its bytes, not the message they were built from: readers that need
// the body (the admin service, tests) decode them.
//
// Immutability: Views, NodeViews and Indexes never change once built.
// Update builds a new Index that reuses every unchanged part of the old
// one by pointer and copies on write the parts it edits, so readers may
// keep using an old Index and its NodeViews for as long as they like. An
// Index keeps no reference to the State's maps, only to model values,
// which are immutable: the caller may mutate its State once NewIndex or
// Update has returned.
//
// Versions: a resource version is the first 8 bytes, in hex, of the
// SHA-256 of the body's deterministic protobuf encoding. A node's system
// version is a hash of the set of its (name, version) pairs: each pair is
// hashed (SHA-256, length-prefixed) and the pair hashes are summed
// lane-wise modulo 2^64; the version is SHA-256(tag, count, sum) cut to 8
// bytes. The sum over the shared defaults, each zone layer's change to it
// and each node's own change are kept in the Index, and Update adjusts
// them by the changed views alone; a node's version is one hash of those
// sums. It depends only on the set of pairs (not on how views were
// shared), so SystemVersion recomputes it from the resources alone.
//
// # Incremental use
//
// Service depends only on its service, its slices and the zones of the
// nodes listed in ServiceViews.Nodes, and on those zones only when zone
// hints can apply. So Update recomputes the services it is told changed
// (their Service object or slices), and for a node whose zone changed
// only the zone-hinted services that read it; other node changes rebuild
// the node's NodeConfig alone. A listed Options.AdvertiseService whose
// ready addresses changed rebuilds every node's NodeConfig (the list is
// shared by all; see controlPlaneAddresses), and so does a change of the
// service ranges, which every Update recomputes from the State's few
// ServiceCIDRs (serviceCIDRs). It then swaps the new views into copies of
// the parts that hold them: the sorted list of services and, when a
// default changed, the sorted default set (copies of slices of pointers,
// O(services) but no hashing or encoding), the zone layers and node
// entries that name the service.
//
// Changes lists what may differ per node, compactly: names whose default
// changed (every node), zone views (the zone's nodes), node views and
// zone moves (that node), NodeConfigs (AllConfigs when the advertised
// control-plane addresses or the service ranges changed). It has no false negatives and few
// false positives; ForNode(name, zone) merges them for one node.
//
// Recomputed views whose version did not change keep the old View, and
// the default set and a zone layer are replaced only when a view in them
// changed: a node ForNode names nothing for may keep its old NodeView,
// which then shares everything with the new one (no old generations are
// kept alive by nodes that are not republished).
package nodeview
