// Package serviceport reads a ServiceView (and the NodeConfig fields they
// render with: cluster CIDRs, node IPs, node port addresses read as
// kube-proxy reads nodePortAddresses, service ranges) the way every
// kernel mode must: names validated (names.go: the one definition of a
// valid name, which the control plane checks API objects with too), one
// family's addresses parsed once and deduplicated, each port's endpoints
// picked by port name, affinity decoded, each port's load-balancing
// algorithm and Maglev tables read (balance.go), and each port's policy
// decided once (decide.go): which endpoints internal and external traffic
// use, and whether traffic without one is rejected or dropped.
//
// Invariants:
//   - Modes differ in what they program, not in what a view means:
//     reading and deciding here keeps iptables, nftables, ipvs and
//     userspace agreeing on every edge of bad input and policy corner.
//   - A port's Cluster and Local sets are sorted by address and port and
//     deduplicated; a Table's slots index exactly that order, so a mode
//     maps a slot to an endpoint without parsing again.
//   - A hashed algorithm comes with a table for every set that has
//     endpoints, or the port is read as random and the reason reported:
//     every node hashes alike from the control plane's table, or not at
//     all.
//   - It does no I/O: the control plane links it too.
package serviceport
