// Package nodeview is the pure heart of the control plane: from a
// model.State it computes what each node must program, as named, versioned
// resources ready to send.
//
// # Role
//
// Service computes every variant of one service's view at once (a Default
// for most nodes, plus ByZone and ByNode views only where the view really
// differs). NewIndex runs Service for every service of a State and
// Index.Node assembles one node's NodeView: every service view plus the
// node's NodeConfig. Compute is the one-shot form.
//
// Endpoint selection follows upstream kube-proxy (pkg/proxy
// endpointslicecache.go and topology.go), done once here instead of on
// every node:
//   - slices of a family the service has no cluster IP for are ignored;
//   - an endpoint serves service port P only if its slice has a port of
//     P's name and protocol, whose number is the target port; selection
//     is per service port, and each chosen endpoint is listed once with
//     exactly the ports it was chosen for;
//   - duplicates of an address (per service port) are merged: a
//     non-terminating entry wins over a terminating one, then a ready one
//     over a non-ready one, then the first in slice-name order;
//   - ready endpoints are used; a set with no ready endpoint uses the
//     serving-terminating ones instead (cluster and local sets decide
//     separately);
//   - internalTrafficPolicy Local makes the cluster set the node's local
//     endpoints; any Local policy fills the local set and marks is_local;
//   - topology hints (forNodes, then forZones) restrict the cluster set
//     under internal policy Cluster only when every ready endpoint of the
//     port carries them and one names this node (or its zone).
//     spec.trafficDistribution itself is not read, as upstream does not:
//     the EndpointSlice controller turns it into hints.
//
// # Invariants
//
// Purity: nothing here does I/O, reads a clock or depends on map order or
// on the number of workers. The same State gives the same bytes and the
// same versions in every process, so control-plane replicas agree.
//
// Sharing: a service whose view is the same on every node has exactly one
// View, built, marshalled and hashed once; a node that hosts no endpoint
// of a Local-policy service shares the service's "no local endpoints"
// Default, and equal variants are one View. A NodeView holds a pointer to
// the index's shared default set, a pointer to its zone's shared layer of
// zone views (topology hints), and only its own node-specific views and
// NodeConfig: never a copy of the shared views. Views and everything they
// point to are immutable; the Index is safe for concurrent use.
//
// Versions: a resource version is the first 8 bytes, in hex, of the
// SHA-256 of the body's deterministic protobuf encoding. A node's system
// version is a hash of the set of its (name, version) pairs: each pair is
// hashed (SHA-256, length-prefixed) and the pair hashes are summed
// lane-wise modulo 2^64; the version is SHA-256(tag, count, sum) cut to 8
// bytes. The sum over the shared defaults, and each zone layer's change to
// it, are computed once per Index; a node's version adds its zone's change,
// swaps in its own views and adds its NodeConfig: O(own views), not
// O(services). It depends only on the set of pairs (not on how views were
// shared), so SystemVersion recomputes it from the resources alone.
//
// # Incremental use
//
// Service depends only on its service, its slices and the zones of the
// nodes listed in ServiceViews.Nodes, so a change to a service or its
// slices recomputes that service alone, and a node change recomputes only
// the services that list the node.
package nodeview
