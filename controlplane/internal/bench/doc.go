// Package bench runs the real control plane (package daemon: informers,
// translation, per-node views, cache, gRPC server) fed from an in-memory
// client-go fake clientset instead of a kube-apiserver, so a benchmark
// measures the control plane alone. It is the "in-process feed" (path b) of
// the fan-out benchmark in e2e/bench; nothing in production imports it.
//
// The control plane runs as its own process (cmd/switchyard-benchcp), so the
// benchmark reads CPU time and peak RSS of the control plane alone from
// /proc, with the simulated agents in the harness process.
//
//	harness ──objects file──▶ benchcp: fake clientset ─▶ informers ─▶ nodeview ─▶ cache ─▶ gRPC ─▶ agents
//	        ──POST /apply───▶ (one EndpointSlice update through the fake's watch)
//
// Control API (HTTP, loopback, see Handler):
//
//	POST /apply              body: one discovery/v1 EndpointSlice (JSON); update, or create when missing
//	POST /profile/cpu/start  ?path=FILE; starts a CPU profile
//	POST /profile/cpu/stop   stops it and writes FILE
//	POST /profile/heap       ?path=FILE; writes a heap profile after a GC
//
// Invariants: the objects are loaded before the informers start, so the
// first view every agent receives is the whole cluster; changes after that
// arrive as watch events, exactly as from an API server.
package bench
