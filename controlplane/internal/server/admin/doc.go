// Package admin serves AdminService, the read-only operator view of the
// control plane: every node's connection and acknowledgement state, one
// node's current view, and one service's per-node status with on how many
// nodes it is applied and the fleet's programming latency of its latest
// change (package fleetlatency). It reads the cache and changes nothing.
//
// Views hold only their wire bytes (package nodeview encodes each once and
// keeps no message), so what the admin service answers with as messages
// it decodes from those bytes on each call, with cache.Decode: a node's
// NodeConfig once per node, a service's view once per version, however
// many nodes share it. A node's view is answered without decoding (its
// resources go out as the bytes they are, View.Raw).
package admin
