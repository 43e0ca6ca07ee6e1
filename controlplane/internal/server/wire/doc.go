// Package wire is the control plane's gRPC codec: gRPC's proto codec,
// except for discovery responses, whose resources are handed to the
// transport as buffers that point at each view's shared encoding.
//
// Why: gRPC's codec marshals every response into one buffer of its full
// size, taken from its buffer pool. A node's first batch is a 4 MiB part of
// 10k pre-encoded views, so every agent syncing at once held a private 4 MiB
// copy of bytes that already exist once for all nodes, and the pool kept
// those buffers after the writes (386 MB of a 552 MB heap at 1,000 agents).
// Here a response costs a slice of buffer references; the views' bytes are
// copied only by the transport, frame by frame, as it writes them. The
// session sends a *Message (the response plus the views it was built
// from), so a view that keeps its bytes already framed as the response's
// field (cache.View.Framed) is one buffer; a bare response's resources are
// two each (tag and length, then the bytes).
//
// Invariants:
//   - The bytes on the wire are exactly gRPC's proto codec's: fields in
//     number order, each resource framed as a length-delimited field, a
//     resource that carries only unknown fields (cache.View.Raw) written as
//     those bytes.
//   - The referenced bytes are never written: views are immutable once
//     published (cache.View), and mem.SliceBuffer's Free does nothing, so
//     the transport only reads them, however long it holds them.
//   - Every other message, and every request, goes through gRPC's proto
//     codec unchanged.
package wire
