package dataplane

import (
	"errors"
	"time"
)

// Skip is a piece of input a mode left out of what it programs (a bad
// address, an address of the other family, an endpoint without the port,
// a protocol the mode cannot proxy), with the service it belongs to, so
// the caller can log and count it. Every mode reads input through
// serviceport, so the same bad input gives the same Skip in each.
type Skip struct {
	Service string
	Reason  string
}

// ConntrackError is an Apply whose kernel changes were made but whose
// stale UDP conntrack entries could not all be deleted: forwarding is
// right for new flows, and the caller may still ACK.
type ConntrackError struct{ Err error }

func (e *ConntrackError) Error() string { return "conntrack cleanup: " + e.Err.Error() }

func (e *ConntrackError) Unwrap() error { return e.Err }

// IsConntrackError reports whether err is, or wraps, a ConntrackError.
func IsConntrackError(err error) bool {
	var ce *ConntrackError
	return errors.As(err, &ce)
}

// SyncStats counts what the last Apply (or Cleanup) changed in the
// kernel, for tests, benchmarks and metrics. It is one type for every
// mode so a caller reads any mode's the same way; each mode fills the
// counters of the objects it programs and leaves the others zero.
type SyncStats struct {
	// Full: the Apply rewrote everything the mode owns.
	Full bool

	// Rules: chains written (created or rewritten) and removed
	// (iptables, nftables).
	ChainsWritten, ChainsRemoved int
	// Restores counts iptables-restore runs (iptables, ipvs);
	// TableRewrites those without --noflush that replaced whole tables.
	Restores, TableRewrites int
	// IPSetRestores counts ipset restore runs (iptables, ipvs);
	// HairpinAdded and HairpinRemoved the members of the iptables mode's
	// hairpin set they added and deleted.
	IPSetRestores, HairpinAdded, HairpinRemoved int

	// Transactions counts nft transactions and Operations the commands
	// in them; ElementsAdded and ElementsDeleted set and map elements
	// (nftables).
	Transactions, Operations       int
	ElementsAdded, ElementsDeleted int
	// Netlink counts transactions sent over netlink; NetlinkFallbacks
	// partial transactions that ran nft because the netlink translator
	// does not support one of their operations (nftables).
	Netlink, NetlinkFallbacks int
	// TxTime is the wall time spent running the transactions (nft
	// processes, or opening the netlink socket and committing).
	TxTime time.Duration
	// NetlinkCPU is the user+system time of the thread that sent and
	// acknowledged the netlink transactions; the kernel's commit runs in
	// that thread's sendmsg, so it is counted.
	NetlinkCPU time.Duration
	// FlowtableSkipped: the node asks for a flowtable
	// (NodeConfig.flowtable_interfaces) and the kernel refuses one, so
	// the Apply programmed none; FlowtableDevices are the devices the
	// flowtable holds after it, and FlowtableErrors the device
	// transactions that failed (retried at the next Apply) (nftables).
	FlowtableSkipped bool
	FlowtableDevices int
	FlowtableErrors  int

	// IPVS virtual servers, real servers and the addresses bound to the
	// dummy interface, by change (ipvs).
	VirtualServersAdded, VirtualServersUpdated, VirtualServersDeleted int
	RealServersAdded, RealServersUpdated, RealServersDeleted          int
	AddressesAdded, AddressesDeleted                                  int
	// Draining is the number of real servers left at weight 0, waiting
	// for their connections to end (ipvs).
	Draining int
}
