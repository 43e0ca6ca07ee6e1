// Package agent wires the node agent together: it restores the persisted
// view, runs the sync loop over a dataplane, holds the control-plane stream,
// serves /healthz, /livez and /metrics, and the health-check node ports.
//
//	control plane ──DeltaSnapshots──▶ discovery.Client ──Apply──▶ syncer.Syncer ──▶ dataplane
//	                 ◀──ACK/NACK──────┘                              │ persist.Store (state dir)
//	                                                                 ├▶ healthcheck.Servers
//	                                      canary.Canary ─Decorate────┘  (its Service, in each state applied)
//	                                        └─probe VIP─▶ the rules ─▶ its listener ─▶ health.Tracker
//
// Invariants: the persisted view is applied (Full, never Cleanup) before
// any stream opens, so a restarted agent forwards even without a control
// plane; on shutdown the stream closes and the rules stay in place.
// Restarts never go back in time: a state file that cannot be trusted
// (empty, another node's, format 1, damaged; see package persist) is
// logged ("state file rejected", reason), counted
// (switchyard_agent_state_file_rejections_total) and not applied — the
// kernel is adopted as found and the control plane's first response, a
// whole view, is the first sync; an update recorded before a commit that
// was not saved adds its resources to the restored view and leaves its
// removals to the control plane, so the restore adds and updates but
// removes nothing the kernel may hold.
//
// The datapath canary (Options.DatapathCanary, package canary) is the
// agent's own Service, added to what the syncer applies and never to the
// view, the state files or the ACKs; its probe makes /healthz, and so the
// load-balancer health-check node ports, fail while the programmed rules
// do not forward, from the first successful sync on.
//
// TLS: Options.Credentials (tlscreds.Source) runs beside the stream and
// keeps the files behind the dial options' credentials current; the
// reconnect it asks for when the kubelet rotated the client certificate
// replaces the stream (same address, resumed from the applied versions)
// and leaves the rules as they are.
//
// Bootstrap: the control-plane addresses of the last applied NodeConfig
// are persisted next to the view (persist.ControlPlanesFileName) and
// dialled before the configured ones, so a restart needs no Service VIP
// or cluster DNS once the agent has been connected once. Missing, empty
// or unreadable, that file is replaced by the restored view's NodeConfig,
// else only the configured addresses are dialled.
package agent
