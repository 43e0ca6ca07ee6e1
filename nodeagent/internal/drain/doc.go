// Package drain bounds how long the agent keeps state it no longer
// forwards with (an IPVS mode it switched away from, kube-proxy's IPVS
// after a takeover) for the connections that state still carries.
//
// Invariants:
//   - A drain starts the first time connections are reported and ends
//     when none are, or when Max has passed since it started: the state
//     is then removed and what it still carries breaks. Max defaults to
//     DefaultMax, IPVS's own TCP established timeout, so no connection
//     idle for less than IPVS keeps it is cut.
//   - Each drain logs three lines at most: started, bound reached (warn),
//     drained; retries in between log nothing.
//   - A Bound holds no lock: its owner serializes calls.
package drain
