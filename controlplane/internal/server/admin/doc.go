// Package admin serves AdminService, the read-only operator view of the
// control plane: every node's connection and acknowledgement state, one
// node's current view, and one service's per-node status. It reads the
// cache and changes nothing.
package admin
