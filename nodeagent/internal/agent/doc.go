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
//
// Bootstrap: the control-plane addresses of the last applied NodeConfig
// are persisted next to the view (persist.ControlPlanesFileName) and
// dialled before the configured ones, so a restart needs no Service VIP
// or cluster DNS once the agent has been connected once. Missing, empty
// or unreadable, that file is replaced by the restored view's NodeConfig,
// else only the configured addresses are dialled.
package agent
