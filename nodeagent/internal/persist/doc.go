// Package persist stores what the agent's kernel holds in its state
// directory, so that a restarted agent can restore it, reconcile without
// flushing, and tell the control plane what it already has — and never
// restores a view older than the kernel's, another node's, or a damaged
// one.
//
// Files (format 2, format.go: a text header — node, version, base,
// sha256 and length of the payload — then a protobuf payload):
//   - view.pb: the view the kernel held after the last saved commit, a
//     StreamSnapshotsResponse whose version_info is the system version and
//     whose resources are sorted by name (deterministic marshal).
//   - pending.pb: written before each commit (Intend), removed after its
//     save: every update intended since view.pb was saved, as a
//     DeltaSnapshotsResponse, with base = view.pb's version. A crash
//     between a commit and its save leaves it, and Load adds its resources
//     to the view (its removals wait for the control plane), so the
//     restored view covers the kernel whether the commit happened or not.
//   - control-planes.json: the control-plane addresses learnt from the
//     last NodeConfig ({"addresses": ["10.0.0.5:18000", …]}), which the
//     agent dials first on a restart.
//
// Invariants: every write is atomic (temp file in the same directory,
// fsync, rename, fsync of the directory), so a crash leaves either the old
// or the new file, never a torn one. Load restores nothing, with a
// *RejectedError naming the reason, from a file that is empty, format 1
// (agents before this format wrote a bare view: it is rejected, not read,
// because it cannot say whose it is or whether the kernel is newer),
// another node's, another format, truncated, altered, or a pending record
// of another view file. Missing files are not an error. When pending.pb
// cannot be written, view.pb is removed, so that a crash restores nothing
// rather than an older view.
package persist
