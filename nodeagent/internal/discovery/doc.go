// Package discovery is the agent's DeltaSnapshots stream client, with xDS
// semantics:
//
//   - every stream starts with the Node identity and the versions of what
//     the agent has applied (initial_resource_versions), so a reconnect
//     costs only the difference;
//   - parts of a split batch (empty system_version) are buffered and each
//     is ACKed with an empty applied_version; the union is applied when the
//     part carrying the system version arrives;
//   - a complete batch is ACKed (nonce, applied_version, ApplyReport) only
//     after the Applier returned, i.e. after the kernel change returned; an
//     apply failure is a NACK with error_detail, and the Applier keeps its
//     last good state;
//   - any end of a stream (ABORTED "replaced by a newer stream",
//     UNAVAILABLE, a dial failure) leads to the next --control-plane
//     address after a capped exponential backoff with jitter; the backoff
//     resets once a stream delivered a response. There is never a tight
//     loop: every reconnect waits at least half the initial backoff.
//
// The client runs in one goroutine (Run) and sends from it only, so a
// stream is never written concurrently.
package discovery
