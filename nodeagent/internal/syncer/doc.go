// Package syncer is the agent's sync loop, with kube-proxy's semantics:
// updates from the control plane are queued, bursts are coalesced so that
// two syncs are at least the min sync period apart, every sync period a
// full resync (ApplyOptions.Full) repairs drift, and other syncs are
// partial. It owns the applied view (the last good state) and the active
// dataplane.
//
// Invariants:
//   - Apply returns only after the dataplane returned, so the caller may
//     ACK; on error the applied view is unchanged (the caller NACKs).
//   - On start with a restored view, the first sync is a full Apply of that
//     view; nothing is ever flushed on start (no Cleanup).
//   - A NodeConfig whose mode differs from the active one switches modes:
//     the new mode is programmed (Full) first, then the old one is cleaned
//     up, so established flows keep a path.
//   - Every loop stops when its context is canceled; rules stay in place.
package syncer
