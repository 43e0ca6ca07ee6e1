// Package delta serves DeltaSnapshots: incremental discovery. Each response
// carries the resources that changed for the node and the names removed
// since the state the agent acknowledged; a reconnecting agent sends
// initial_resource_versions and receives only the difference.
//
// The protocol loop (nonces, ACK/NACK, one response in flight, coalescing,
// split responses) is package stream's; this package only decides what a
// batch contains. Its invariant: the agent's state is what it sent in
// initial_resource_versions until its first ACK of a whole batch, and
// exactly the acknowledged view after that; a NACK leaves it unchanged.
// What each stream's first batch resumed and sent is reported to a
// ResumeObserver (the control plane's delta_initial_resources_total).
package delta
