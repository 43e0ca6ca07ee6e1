// Package fleetlatency measures, per service, how long the fleet took to
// program the service's latest change: from the moment this replica
// computed the change to each node's ACK of a view holding it. AdminService
// GetService reports its quantiles ("live on 4998 of 5000 nodes (p50
// 310ms, p99 1.2s)").
//
//	watch ──ServicesChanged(changed, removed)──▶ Tracker ◀──Applied(gen, names)── cache (at each ACK)
//	                                                │
//	                                  admin ◀───────┘ Service(name): Stats
//
// A Tracker keeps, per service name, the time and generation of its latest
// change and a fixed-size histogram of the ACK latencies since then. A
// change resets the histogram; removing the service drops its entry. The
// cache tells it, at each ACK, the names the acknowledged view brought to
// the node at their desired version, with the generation of that view (the
// Tracker's Generation when the view was published). Generations tell an
// ACK of the change from an ACK of the view before it that arrives while
// the change is still being published.
//
// # Trigger times
//
// The Tracker also keeps what agents need for kube-proxy's
// network_programming_duration_seconds: per service, its recent changes
// (at most maxChanges) with the generation that published them, the
// last-change-trigger-time of each EndpointSlice they added or updated,
// and the nodes they reached when not every node (a Local policy's own
// views). A discovery stream asks Triggers for the changes a view it
// sends brings the node — the generations since its watch was first
// marked after its previous view — and sends those times beside the
// resources; the agent observes each once its kernel change returned.
// kube-proxy's rule decides what is kept: only slices added or updated
// (a change that deleted one of the service's slices carries none, as
// kube-proxy drops a service's pending times on a slice deletion),
// nothing for a Service-only change, nothing before the Tracker was made
// or after its clock's now. Streams never attach times to a stream's first
// batch: a (re)connect is no change.
//
// Two approximations, both bounded: a node more than maxChanges changes
// of one service behind observes only the newest; and a change published
// while a node's earlier change still waits to be sent is attached to it
// even when it did not reach that node through its zone (zones are not
// told apart, only nodes) — its trigger is newer than the waiting
// change's, so it never reports more than the batch's real worst.
//
// # Resolution
//
// Buckets are logarithmic, 8 per doubling, from 1ms to 2^20 ms (17m29s),
// with one bucket below (up to 1ms) and one above. A quantile is the
// sample of rank ceil(q·n) (nearest rank), reported as the upper bound of
// its bucket or as the largest sample when that is smaller: never below
// the true value and at most 2^(1/8)-1 = 9.05% above it. Latencies up to
// 1ms report as 1ms (or the largest sample); those beyond 17m29s as the
// largest sample.
//
// # Invariants
//
//   - Memory is bounded by the number of services, never by nodes or
//     samples: one entry (about 700 bytes, plus at most maxChanges recent
//     changes' trigger times) per service that changed since the replica
//     started, none per node or per (node, service).
//   - Services that have not changed since the replica started have no
//     entry and no latency: the first views are not a change.
//   - An ACK path never waits for another ACK path: ACKs take a read lock
//     and count with atomic adds; only a change takes the write lock.
//   - Time comes from an injected clock, the same for changes and ACKs.
package fleetlatency
