// Package persist stores the agent's last applied view in its state
// directory so that a restarted agent can restore it, reconcile without
// flushing, and tell the control plane what it already has.
//
// Format: one file, view.pb, holding a StreamSnapshotsResponse whose
// version_info is the system version and whose resources are the view's
// resources sorted by name (deterministic marshal). No new .proto is needed.
// Beside it, control-planes.json holds the control-plane addresses learnt
// from the last NodeConfig ({"addresses": ["10.0.0.5:18000", …]}), which
// the agent dials first on a restart.
//
// Invariants: Save and SaveControlPlanes are atomic (temp file in the same
// directory, fsync, rename, fsync of the directory), so a crash leaves
// either the old or the new file, never a torn one. Load and
// LoadControlPlanes of a missing file are not an error.
package persist
