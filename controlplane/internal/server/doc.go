// Package server wires the control plane's gRPC server and nothing more:
// DiscoveryService (DeltaSnapshots from package delta, StreamSnapshots from
// package sotw), AdminService (package admin), grpc.health.v1 and server
// reflection, with message-size limits, keepalive policy and optional
// (m)TLS.
//
//	           ┌───────────── grpc.Server ─────────────┐
//	agents ───▶│ DiscoveryService ─ delta ┐            │
//	           │                  └ sotw ─┼─ stream ───┼──▶ cache
//	grpcurl ──▶│ AdminService ── admin ───┘            │
//	           │ grpc.health.v1, reflection            │
//	           └───────────────────────────────────────┘
//
// Health reports NOT_SERVING until SetReady(true) (the caller does that once
// its informers synced and the first views are published) and again while
// shutting down. On shutdown open discovery streams end with
// codes.Unavailable so agents reconnect to another replica; the server then
// stops gracefully, forcibly after ShutdownGrace.
package server
