package ipvs

import (
	"context"
	"net/netip"

	"github.com/switchyard-proxy/switchyard/dataplane"
)

// VSKey identifies a virtual server: address, port and protocol.
type VSKey struct {
	Addr     netip.Addr
	Port     uint16
	Protocol dataplane.Protocol
}

func (k VSKey) String() string {
	return k.Protocol.Upper() + " " + netip.AddrPortFrom(k.Addr, k.Port).String()
}

// compare orders keys by address, port, protocol.
func (k VSKey) Compare(o VSKey) int {
	if c := k.Addr.Compare(o.Addr); c != 0 {
		return c
	}
	if k.Port != o.Port {
		return int(k.Port) - int(o.Port)
	}
	return int(k.Protocol) - int(o.Protocol)
}

// VirtualServer is one IPVS service as this package programs it.
type VirtualServer struct {
	Key VSKey
	// Scheduler is the IPVS scheduler name (rr, wrr, lc, …).
	Scheduler string
	// HashPort: the hashing scheduler (mh, sh) hashes the client's port
	// with its address (IP_VS_SVC_F_SCHED2: mh-port, sh-port), so one
	// client's connections spread; maglev's meaning.
	HashPort bool
	// Timeout is the persistence timeout in seconds (ClientIP affinity);
	// 0 means not persistent.
	Timeout uint32
}

// RealServer is one destination of a virtual server. It is always
// programmed with masquerade (NAT) forwarding.
type RealServer struct {
	Addr   netip.AddrPort
	Weight int
	// Connection counts, as the kernel reports them; ignored when adding
	// or updating.
	ActiveConns, InactiveConns int
}

// Kernel is the seam between this package and the kernel's IPVS table,
// the dummy interface and sysctls of one network namespace. The real one
// is NetlinkKernel (Linux); ipvstest.Fake keeps everything in memory.
// Errors for things that are already gone (deleting a missing address,
// real server or link) are not reported.
type Kernel interface {
	// CheckIPVS returns an error wrapping ErrIPVSUnavailable when the
	// kernel has no IPVS.
	CheckIPVS(ctx context.Context) error

	VirtualServers(ctx context.Context) ([]VirtualServer, error)
	AddVirtualServer(ctx context.Context, vs VirtualServer) error
	UpdateVirtualServer(ctx context.Context, vs VirtualServer) error
	DeleteVirtualServer(ctx context.Context, k VSKey) error
	RealServers(ctx context.Context, k VSKey) ([]RealServer, error)
	AddRealServer(ctx context.Context, k VSKey, rs RealServer) error
	UpdateRealServer(ctx context.Context, k VSKey, rs RealServer) error
	DeleteRealServer(ctx context.Context, k VSKey, addr netip.AddrPort) error

	// EnsureDummy creates the dummy link name when missing and sets it up.
	EnsureDummy(ctx context.Context, name string) error
	// DeleteLink deletes link name.
	DeleteLink(ctx context.Context, name string) error
	// Addresses lists the addresses of link name; none when it is missing.
	Addresses(ctx context.Context, name string) ([]netip.Addr, error)
	// AddAddress binds a as a host address (/32, /128) to link name.
	AddAddress(ctx context.Context, name string, a netip.Addr) error
	DeleteAddress(ctx context.Context, name string, a netip.Addr) error

	// Sysctl reads and SetSysctl writes a sysctl of the namespace, by its
	// dotted name ("net.ipv4.vs.conntrack").
	Sysctl(ctx context.Context, name string) (string, error)
	SetSysctl(ctx context.Context, name, value string) error
}
