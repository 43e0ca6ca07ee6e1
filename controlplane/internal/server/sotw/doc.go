// Package sotw serves StreamSnapshots: state of the world. Each response
// carries the node's whole view and its version, for simple clients and
// grpcurl. A stream whose first request names the version the agent has
// receives nothing until the view differs from it.
//
// The protocol loop (nonces, ACK/NACK, one response in flight, coalescing,
// split responses) is package stream's; a view too large for one message is
// split, every part but the last with an empty version_info.
package sotw
