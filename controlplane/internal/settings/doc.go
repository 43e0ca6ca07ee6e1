// Package settings decides the cluster-wide NodeConfig settings (mode,
// sync periods, IPVS scheduler, cluster CIDRs, masquerade-all, node port
// addresses) one control-plane replica sends, and reports where they
// come from.
//
// Replicas agree by construction when they all read one ConfigMap: its
// config.yaml overrides, field by field, the replica's flags, which are
// only defaults. A ConfigMap that does not parse keeps the settings the
// replica had (it never falls back to flags a sibling may not share);
// a ConfigMap that is absent means the flags.
//
//	flags ──defaults──▶ Source.Resolve(ConfigMap) ──▶ nodeview.Defaults
//	                          │ Status (hash, source, error): admin, metrics
//	                          ▼
//	   agent's Node.settings_hash ──CheckAgent──▶ log + metric when it differs
//
// config.yaml's rollout (RolloutFile) is parsed here with the rest, into
// a rollout.Spec whose target is the file's settings with the rollout's
// over them; package rollout decides which nodes get it.
//
// Invariants:
//   - Parsing is pure and shared with the flags (cmd/), so a value means
//     the same in both places.
//   - Resolve is called from one goroutine (the watch loop); Status and
//     CheckAgent are safe from any.
//   - Nothing here imports k8s.io/api: the watch loop hands in the
//     ConfigMap's data.
package settings
