// Package cache holds the newest view of every node and what each node's
// agent has acknowledged. It is the only state the discovery servers share.
//
// The compute side publishes a NodeView per node with Publish; streams open a
// Watch on a node, wait on Ready, and Take the newest view plus the names that
// may have changed since their previous Take.
//
//	compute ──Publish(node, view, changed)──▶ Cache ──Ready/Take──▶ Watch ──▶ one stream
//	                                            ▲
//	                        Acked / Nacked ─────┘ (admin reads Snapshot)
//
// Invariants:
//   - Publish and Remove never block on a stream: they swap a pointer, merge
//     names into the watch's dirty set and signal a channel of capacity one.
//   - A watch's pending state is bounded: the dirty set never holds more names
//     than the newest view has resources (beyond that it collapses to "diff
//     everything"), and a stream keeps at most one response in flight. A stuck
//     reader therefore costs one view reference, one dirty set and one
//     response, never a backlog.
//   - Take always returns the newest view: intermediate views are skipped.
//   - At most one watch per node: a new one replaces the previous, whose Done
//     channel closes so its stream can end.
//   - NodeViews and Views are immutable once published; the cache and the
//     servers keep references to them without copying, and a View's Bytes
//     are written to the wire verbatim (see View.Raw and View.Framed).
//   - A View is the compute side's encoding, wrapped once by NewView; the
//     cache never encodes a resource itself. Decode is for readers that
//     need the messages (the admin service), never for sending.
//   - With an ApplyObserver (package fleetlatency), each ACK after a
//     stream's first tells it the names the acknowledged view brought to
//     the node at their desired version. What the cache keeps for it is
//     per node, never per (node, name): the observer's generation of the
//     newest view, and the names taken since the last ACK, bounded as the
//     dirty set is.
package cache
