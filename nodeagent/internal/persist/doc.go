// Package persist stores what the agent's kernel holds in its state
// directory, so that a restarted agent can restore it, reconcile without
// flushing, and tell the control plane what it already has — and never
// restores a view older than the kernel's, another node's, or a damaged
// one.
//
// Files (format 3, format.go: a text header — node, generation, version
// or base, and for the view the sha256 and length of its payload):
//   - view.pb: the view as of the last compaction, a
//     StreamSnapshotsResponse whose version_info is the system version and
//     whose resources are sorted by name (deterministic marshal).
//   - changes.log: on top of view.pb's generation and version, records
//     appended one by one (log.go): before each commit an intent (the
//     batch the kernel may soon hold), after it an applied record (the
//     resources of the names that changed, or their removal). Load
//     replays the applied records and adds the resources of the intents
//     since the last one (their removals wait for the control plane), so
//     the restored view covers the kernel whether a commit happened or
//     not. A save rewrites view.pb whole (compaction: the next generation,
//     an empty log) only when the log has grown as large as it, or the
//     log cannot go on (unknown changes, a failed write).
//   - control-planes.json: the control-plane addresses learnt from the
//     last NodeConfig ({"addresses": ["10.0.0.5:18000", …]}), which the
//     agent dials first on a restart.
//
// Invariants: view.pb and a new log are written atomically (temp file in
// the same directory, fsync, rename, fsync of the directory), view.pb
// before the log, so a crash leaves the old or the new file and a log of
// an older generation, which the view covers and Load ignores. Each
// record is fsynced before Intend or Save returns, so a crash tears only
// the last record, which Load drops (the call writing it never returned)
// and the next append cuts off. Load restores nothing, with a
// *RejectedError naming the reason, from a file that is empty, format 1
// (a bare view: it cannot say whose it is or whether the kernel is
// newer) or any other format, another node's, truncated, altered (a
// damaged record with records after it included), or a log of a newer
// generation or another version. Missing files are not an error. When an
// intent cannot be written, view.pb is removed, so that a crash restores
// nothing rather than an older view.
package persist
