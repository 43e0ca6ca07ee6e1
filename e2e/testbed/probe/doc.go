// Package probe is the test bed's client: from inside a network namespace it
// opens TCP connections or exchanges UDP datagrams with a service address and
// counts which echo backend (see package echo) answered each attempt.
//
// Every attempt has its own timeout (DefaultTimeout, 0.5 s) and, unless a
// reused UDP socket is requested, its own socket and so its own source port,
// so each attempt is a new conntrack entry and a new load-balancing decision.
// Sockets are created on a thread inside the namespace through a Runner
// (*netns.Topology) and used from ordinary goroutines afterwards.
//
// Run modes: TCP and UDP make a fixed number of attempts; Stream makes
// attempts at a bounded rate until its duration or context ends, for
// reliability tests that change the dataplane while traffic flows. Network
// failures are results (Failure with a Reason), never errors; an error means
// the probe itself could not run (namespace refused, bad options).
package probe
