// Package stream is the discovery-stream machinery both wire variants share
// (package delta and package sotw plug a Variant into it): the first-request
// handshake and node authorization, one goroutine receiving and one sending,
// nonces, ACK/NACK bookkeeping, coalescing and size-bounded packing.
//
// One session per stream, one goroutine owning its state:
//
//	Recv goroutine ──requests──▶ session loop ◀──Ready── cache.Watch
//	                                  │
//	                                  └──one response──▶ Send goroutine
//
// Protocol invariants:
//   - Every response has a fresh nonce. A request whose response_nonce is
//     the latest one sent answers it: ACK without error_detail, NACK with it.
//     While none is in flight, a request repeating the nonce of the last
//     complete batch acknowledged, without error_detail, is a report
//     refresh: only its report (datapath, drift) is kept. Requests with
//     any other nonce are stale and ignored.
//   - At most one response is in flight: the next is sent only after the
//     previous one is answered. A stuck reader therefore holds one response;
//     changes meanwhile only grow the watch's bounded dirty set, and the next
//     response carries the newest view, never a backlog.
//   - A NACK keeps the agent's acknowledged state. A newer view is sent as
//     soon as there is one; the rejected version itself is sent again only
//     after a backoff (NackRetry, doubled per consecutive NACK up to
//     NackRetryMax), as kube-proxy retries a failed sync: a kernel's
//     refusal is often transient, and a node must not stay stale until
//     something else changes. An ACK resets the backoff.
//   - A change to an idle session is sent at once; changes within the
//     coalesce window after a flush wait for the window to end and go out
//     as one response (kube-proxy's min-sync-period shape), so a burst
//     costs two responses, not one per change, and a lone change no delay.
//   - A batch too large for one message is split into parts sent one after
//     the other, each answered by the agent. Every part but the last has an
//     empty version; the last carries the batch's version. An agent buffers
//     parts and applies the batch when the last one arrives.
//   - Streams end when the client goes away, when a newer stream for the same
//     node replaces them (codes.Aborted), or when the server shuts down
//     (codes.Unavailable).
package stream
