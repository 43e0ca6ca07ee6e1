// Package syncer is the agent's sync loop, with kube-proxy's semantics:
// updates from the control plane are queued, bursts are coalesced so that
// two syncs are at least the min sync period apart, every sync period a
// full resync (ApplyOptions.Full) repairs drift, and other syncs are
// partial. It owns the applied view (the last good state) and the active
// dataplane.
//
// A sync carries what changed across the dataplane boundary: the names
// the pending updates carry or remove go to Apply as its hint
// (ApplyOptions.Changed; none on a full sync), and the dataplane state is
// carried from sync to sync (view.WithState: each map copied once per
// sync), never rebuilt from the whole view.
//
// Invariants:
//   - Apply returns only after the dataplane returned, so the caller may
//     ACK; on error the applied view is unchanged (the caller NACKs).
//   - The dataplane is always given the whole desired state; the hint is
//     exact for a partial sync, as the dataplane's last successful Apply
//     was of the applied view (a failure makes the next sync full, a
//     switch starts a new dataplane with a full sync).
//   - A failed commit may have got half-way, so the sync after a failed
//     one is full (kube-proxy's needFullSync), and its view is saved even
//     without an update: the kernel and the journal hold the applied view
//     again, never the failed batch. What a failed switch programmed of
//     its new mode is removed with the other modes' leftovers after that
//     next sync.
//   - On start with a restored view, the first sync is a full Apply of that
//     view; nothing of the mode in use is ever flushed on start.
//   - Each batch is recorded (Journal.Intend) before its commit and the
//     applied view saved after it, so a crash in between cannot make the
//     next start restore a view older than the kernel's.
//   - A NodeConfig whose mode differs from the active one switches modes:
//     the new mode is programmed (Full) first, then the old one is cleaned
//     up, so established flows keep a path.
//   - What other modes left in the kernel (an agent restarted in another
//     mode) is removed only after the first successful sync of the mode in
//     use, once that sync's callers are answered (Config.CleanOthers), and
//     again after each switch; a failed clean-up is retried after full
//     syncs, a mode kept for its connections (IPVS) every
//     drainRetryInterval until they drained (Config.RetryDrain). A
//     Service that exists in both modes never loses its path.
//   - The agent's own services (Config.Decorator: the datapath canary)
//     are added to each sync's state after the view's updates and
//     replace the view's of the same names; they never enter the applied
//     view, so never the journal, the announced versions or OnApplied,
//     and the hint of a partial sync names one whenever it differs from
//     the dataplane's last successful Apply.
//   - With a Peer (kube-proxy on the same node, handover.go), one proxy
//     writes the rules at a time: while kube-proxy runs, at start or
//     once its rules came back, the syncer follows the view without
//     writing the kernel (Holding) and, once kube-proxy says its rules are
//     programmed, removes its own (the mode's Cleanup); when kube-proxy
//     stopped (its health silent for PeerGoneAfter) it takes the node back with a full
//     sync, and removes what kube-proxy left only after that sync.
//   - Every loop stops when its context is canceled; rules stay in place.
package syncer
