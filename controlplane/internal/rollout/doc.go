// Package rollout gives new NodeConfig settings to a fleet a step at a
// time: canary nodes first, then growing shares of every node, halting
// when a node that got them rejects its view or reports its datapath
// failing. It also applies the per-node mode a Node label asks for.
//
//	config.yaml rollout ──Spec──┐          Node labels ──┐
//	ConfigMap annotation ─Progress┴─▶ Plan ──nodeview.Settings──▶ Index
//	                                   ▲
//	cache (ACKs, NACKs, datapath) ──Driver.tick──▶ next Progress ──patch──▶ ConfigMap annotation
//
// Invariants:
//   - Which nodes a step reaches depends only on the Spec, the Progress
//     and the nodes' names and labels: every replica that reads the same
//     ConfigMap sends every node the same settings. A node's place in the
//     order is a hash of the rollout's name and its own, so the first 10 %
//     are a different sample for each rollout and the same on every
//     replica.
//   - Steps only grow: a node reached stays reached while the rollout's
//     name is unchanged, so a halt never takes settings back from a node
//     (a NACK left that node on its previous state anyway).
//   - Progress lives in the ConfigMap (annotation ProgressAnnotation),
//     written with the resourceVersion read as a precondition: replicas
//     never both advance one step, a restarted replica resumes where the
//     fleet is, and either replica may halt it.
//   - Each replica gates on the agents connected to it; reached nodes
//     served elsewhere do not block it (the replica serving them gates
//     on them and may halt the rollout).
package rollout
