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
//     name is unchanged (and the annotation is not rewritten by hand), so a halt never takes settings back from a node
//     (a NACK left that node on its previous state anyway).
//   - Progress lives in the ConfigMap (annotation ProgressAnnotation),
//     written with the resourceVersion read as a precondition: replicas
//     never both advance one step, a restarted replica resumes where the
//     fleet is, and either replica may halt it.
//   - Each replica sees only the agents connected to it, so the gate is
//     shared through the same annotation: a replica serving reached nodes
//     that have not applied the step records itself in Progress.Waiting
//     (refreshed every RefreshWaiting) and removes itself once they have;
//     a replica moves the step on only when it serves at least one reached
//     node, all it serves stayed applied and healthy through the pause,
//     and no other replica waits. An entry older than StaleWaiting is a
//     replica gone and holds nobody (its agents reconnect to one that
//     gates on them). Either replica may halt.
package rollout
