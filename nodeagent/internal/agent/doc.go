// Package agent wires the node agent together: it restores the persisted
// view, runs the sync loop over a dataplane, holds the control-plane stream,
// serves /healthz, /livez and /metrics, and the health-check node ports.
//
//	control plane ──DeltaSnapshots──▶ discovery.Client ──Apply──▶ syncer.Syncer ──▶ dataplane
//	                 ◀──ACK/NACK──────┘                              │ persist.Store (state dir)
//	                                                                 └▶ healthcheck.Servers
//
// Invariants: the persisted view is applied (Full, never Cleanup) before
// any stream opens, so a restarted agent forwards even without a control
// plane; on shutdown the stream closes and the rules stay in place.
package agent
