// Package ctl is switchyardctl: a small CLI for people over AdminService.
// Its main package only calls Run, so every command is tested here against
// a real in-process gRPC server.
//
//	Run(args) ─▶ parse global + command flags ─▶ dial (TLS, token) ─▶ one command
//	                                                   │
//	        status ── ListNodes              ──▶ table | protojson
//	        explain ─ Explain                ──▶ summary + endpoints | protojson
//	        view ──── GetNodeView            ──▶ resource table | protojson
//	        diff ──── ListNodes, GetNodeView, GetService per service
//	        service ─ GetService             ──▶ summary (applied N of M, latency) + nodes | protojson
//	        rollout ─ GetRollout             ──▶ summary + steps + reached nodes | protojson
//
// Invariants:
//   - Thin over AdminService: every answer comes from one RPC's response;
//     -o json prints that response as protojson (as grpcurl does), so
//     scripts see the API's field names, not a CLI-only shape. diff is the
//     exception (it joins three RPCs) and prints its own small JSON.
//   - Every RPC runs under --timeout.
//   - Errors are one line on stderr. Exit codes: 0 success; 1 an error,
//     or for diff a difference; 2 a usage error or an error in diff (as
//     diff(1) uses 2 for trouble); 3 a rollout that halted.
//   - The TLS flags are the agent's (--ca-file, --cert-file, --key-file,
//     --insecure) with the same meaning and checks; a bearer token needs
//     TLS, because the control plane reads one only under TLS and a token
//     must not cross the network in plaintext.
package ctl
