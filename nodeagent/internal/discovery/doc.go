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
//     UNAVAILABLE, a dial failure) leads to another address of the dial
//     list after a capped exponential backoff with jitter; the backoff
//     resets once a stream delivered a response. After a stream that
//     delivered one, that address is the first of the list other than
//     the one that ended (the other advertised replicas before the
//     configured addresses); after a failed attempt, the next one after
//     it, so that every address is tried in turn. There is never a tight
//     loop: every reconnect waits at least half the initial backoff;
//   - a reconnect asked for (Config.Reconnect: a rotated client
//     certificate to present) ends the open stream and dials the same
//     address again after the shortest backoff; it resumes like any
//     reconnect, so an unchanged view costs one empty batch (a partial
//     sync naming no service). The signal is received only while a
//     stream is open;
//   - the dial list is the control-plane addresses learnt from the last
//     applied NodeConfig (control_plane_addresses; Config.Learnt at
//     start), rotated by a hash of the node name so that agents spread
//     over the replicas, then the configured addresses not among them. A
//     NodeConfig with a new non-empty list replaces the learnt part and is
//     handed to Config.OnLearnt without ending the stream; an empty list
//     keeps the learnt part (it means the control plane advertises
//     nothing, not that no replica exists). A learnt address that is not
//     configured is dialled with Config.LearntDialOptions (the TLS server
//     name to verify: a learnt address is an IP).
//
// The client runs in one goroutine (Run) and sends from it only, so a
// stream is never written concurrently.
package discovery
