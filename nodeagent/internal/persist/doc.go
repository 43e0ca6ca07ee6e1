// Package persist stores the agent's last applied view in its state
// directory so that a restarted agent can restore it, reconcile without
// flushing, and tell the control plane what it already has.
//
// Format: one file, view.pb, holding a StreamSnapshotsResponse whose
// version_info is the system version and whose resources are the view's
// resources sorted by name (deterministic marshal). No new .proto is needed.
//
// Invariants: Save is atomic (temp file in the same directory, fsync,
// rename, fsync of the directory), so a crash leaves either the old or the
// new view, never a torn one. Load of a missing file is not an error.
package persist
