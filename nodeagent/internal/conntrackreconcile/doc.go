// Package conntrackreconcile keeps the node's UDP conntrack table in
// line with what the agent applied, whatever happened while no agent ran
// or outside what a sync changed: it lists the table, compares it with
// the applied state (conntrack.Reconcile) and deletes the stale entries.
// The dataplanes' change-based cleanup (conntrack.Stale) only sees the
// difference between two of their own syncs, so nothing on a first sync
// (an agent restarted without its state, a new mode after a switch), nor
// what a failed delete left; kube-proxy moved to a reconciler for the
// same reasons (kubernetes#126130).
//
//	syncer ──OnApplied──▶ Trigger ─┐
//	                      timer ───┼──▶ Run loop ──▶ Current() ──▶ conntrack.ReconcileTable ──▶ Table (netlink)
//
// Invariants:
//   - It never runs inside a sync: the syncer only asks for a run
//     (Trigger, which never blocks); runs happen on Run's goroutine,
//     one at a time, and coalesce.
//   - It compares with the state the agent applied last, read after the
//     table is listed, so an endpoint the kernel forwards to when an
//     entry was read is in it; it does nothing before the first
//     successful sync or while kube-proxy holds the node (Current's ok).
//   - It deletes only UDP entries whose original destination is a
//     service address or node port of the applied state, or a DNATed
//     destination inside the cluster's Service ranges
//     (conntrack.Reconcile); TCP and other software's entries are never
//     touched.
//   - The userspace mode does no DNAT (its entries end at the agent's own
//     sockets) and dry-run programs nothing: runs in them do nothing.
//   - Every run ends when its context does; a failed run is counted,
//     logged and retried at the next one.
package conntrackreconcile
