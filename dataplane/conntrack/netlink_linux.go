package conntrack

import (
	"context"
	"fmt"
	"net"
	"net/netip"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/switchyard-proxy/switchyard/dataplane"
)

// Netlink deletes conntrack entries through a netlink handle. The
// handle must have been opened inside the node's namespace (for example
// with netlink.NewHandleAt, or netlink.NewHandle on a thread in it).
type Netlink struct {
	Handle *netlink.Handle
}

var _ Cleaner = Netlink{}

// DeleteUDP implements Cleaner.
func (c Netlink) DeleteUDP(_ context.Context, fam dataplane.Family, flows []Flow) error {
	if len(flows) == 0 {
		return nil
	}
	filters := make([]netlink.CustomConntrackFilter, 0, len(flows))
	for _, fl := range flows {
		filters = append(filters, udpFilter(fl))
	}
	inet := netlink.InetFamily(unix.AF_INET)
	if fam == dataplane.IPv6 {
		inet = netlink.InetFamily(unix.AF_INET6)
	}
	if _, err := c.Handle.ConntrackDeleteFilters(netlink.ConntrackTable, inet, filters...); err != nil {
		return fmt.Errorf("delete UDP conntrack entries: %w", err)
	}
	return nil
}

// udpFilter matches the entries of one Flow. netlink's ConntrackFilter
// cannot match the reply's source port (the endpoint's target port), so
// the match is written out; ConntrackDeleteFilters applies it to every
// entry it lists.
type udpFilter Flow

func (f udpFilter) MatchConntrackFlow(c *netlink.ConntrackFlow) bool {
	fwd, rev := c.Forward, c.Reverse
	if fwd.Protocol != unix.IPPROTO_UDP || fwd.DstPort != f.Dst.Port() {
		return false
	}
	if !f.NodePort && !ipIs(fwd.DstIP, f.Dst.Addr()) {
		return false
	}
	if f.Endpoint.IsValid() && (!ipIs(rev.SrcIP, f.Endpoint.Addr()) || rev.SrcPort != f.Endpoint.Port()) {
		return false
	}
	return true
}

func ipIs(ip net.IP, a netip.Addr) bool {
	b, ok := netip.AddrFromSlice(ip)
	return ok && b.Unmap() == a.Unmap()
}
