// Package agentsim simulates node agents for the fan-out benchmark: each
// Agent holds one real gRPC stream (DeltaSnapshots or StreamSnapshots) to a
// control plane over loopback and answers every response as
// nodeagent/internal/discovery does: a part of a split batch is ACKed at
// once with its nonce; a complete batch is validated (every resource has a
// name and a body, else NACK), "applied" by waiting ApplyDelay, then ACKed
// with its nonce, the version and an ApplyReport.
//
// Agents are goroutines, so a thousand fit in one process. They never
// decode resources into Go structs: a codec scans each response on the wire
// (nonce, version, resource names and bodies), so an agent costs the bytes
// gRPC buffers and little else. The size an agent records for a response is
// its wire size, which equals proto.Size of the decoded message (Decode
// checks that).
//
// Invariants: an agent answers every response exactly once, in order; its
// counters only grow; Fleet.Wait returns once every agent has ACKed more
// complete batches than the given baseline.
package agentsim
