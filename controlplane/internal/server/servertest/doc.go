// Package servertest runs the control plane's gRPC services on loopback
// for tests: a real server, a real client connection, torn down with the
// test; a scripted agent on a discovery stream of either wire variant;
// Fleet, AdminService over three nodes whose agents acknowledge a
// change on a fake clock; ServedService, a service with endpoints for
// the admin RPCs to report on; and CA, a throwaway certificate authority
// for the TLS and mTLS tests of the server and of switchyardctl.
//
// The agent is generic over the two variants as package stream's session
// is: its type parameters are a variant's request and response, and a
// Wire (DeltaWire, SotWWire) adds what differs, opening the stream and
// building an ACK, as a stream.Variant does on the server's side.
//
// Invariants:
//   - Everything a helper starts (servers, connections, streams, the
//     goroutine reading a stream) ends in the test's cleanup, so goleak
//     finds nothing left.
//   - Nothing sleeps to wait for an event: waits are on a channel or a
//     polled condition, bounded by WaitTimeout, and fail the test when it
//     passes.
package servertest
