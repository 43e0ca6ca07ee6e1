// Package admin serves AdminService, the read-only operator view of the
// control plane: every node's connection and acknowledgement state, one
// node's current view, and one service's per-node status with on how many
// nodes it is applied and the fleet's programming latency of its latest
// change (package fleetlatency). It reads the cache and changes nothing.
package admin
