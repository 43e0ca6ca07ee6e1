// Package conformance runs upstream Kubernetes' own e2e suite (e2e.test,
// built from k8s.io/kubernetes/test/e2e by hack/testbed-build.sh) against a
// service proxy on the real-cluster bed (e2e/cluster), and keeps the
// outcome as data: one Results file per proxy, spec name → passed, failed
// or skipped with its reason and duration.
//
// Invariants:
//   - e2e.test runs inside the cluster's client namespace, like every other
//     client of the bed; it never dials from the machine's own namespace.
//   - A spec's outcome is read from ginkgo's JSON report, never from its
//     console output; a run whose report is missing is an error, not an
//     empty result.
//   - A skip carries its reason: ginkgo's own (e.g. a feature the bed lacks)
//     or the selection's (why a spec is not run here): BedSkips is one table
//     of pattern → reason, joined into --ginkgo.skip by SkipRegexp and
//     written back into the results by RecordSkips, so the two never drift.
//   - Markdown (CONFORMANCE.md) is a pure function of the Results files and
//     its options: no clock, no environment; regenerating it from the same
//     files gives the same bytes.
package conformance
