// Package dataplane defines what every kernel mode implements: take the
// complete set of a node's views and make the kernel forward accordingly.
// Modes live in subpackages (iptables, ipvs, nftables, userspace), each with
// its kernel access behind a small seam and a fake for unit tests.
//
// Invariants every implementation keeps:
//   - Apply is given the whole desired state, never a delta; it diffs
//     against what it applied last and touches only the difference, unless
//     Full is set (the periodic resync that repairs drift). The caller's
//     hint (ApplyOptions.Changed) only narrows where a partial sync looks
//     for that difference; without it the mode compares every service.
//   - A failed Apply leaves the previously applied rules forwarding; the
//     caller NACKs and keeps its last good state.
//   - Nothing is flushed on start: a restarted agent reconciles.
//   - Implementations never touch a network namespace other than the one
//     they were built for.
package dataplane
