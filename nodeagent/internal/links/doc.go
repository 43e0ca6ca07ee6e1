// Package links keeps the names of the node's network interfaces as
// they come and go, for the dataplane modes that program per-interface
// objects (the nftables mode's flowtable, NodeConfig.flowtable_interfaces).
//
//	kernel ──RTM_NEWLINK / RTM_DELLINK──▶ Watcher.Run (netlink subscription, the agent's namespace)
//	                                        │ names by ifindex (a rename replaces)
//	                                        ├─▶ Names(): sorted snapshot, read at each sync (dataplane.State.Links)
//	                                        └─▶ OnChange: the agent asks the syncer for a sync
//
// Invariants:
//   - Run subscribes before it lists (the subscription's ListExisting),
//     so no interface created in between is missed; a subscription the
//     kernel ends (ENOBUFS after a burst, a closed socket) is opened
//     again, listing again, after a short pause, until ctx ends.
//   - OnChange is called only when the set of names changed, never for
//     a state change (up/down, MTU) of a known interface, and never with
//     the watcher's lock held.
//   - The Source seam (netlinkSource in production) is all that touches
//     the kernel; tests feed updates through a fake.
package links
