package conntrack

import (
	"context"
	"errors"
	"fmt"
	"net"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

// Netlink deletes conntrack entries through a netlink handle. The
// handle must have been opened inside the node's namespace (for example
// with netlink.NewHandleAt, or netlink.NewHandle on a thread in it).
type Netlink struct {
	Handle *netlink.Handle
}

var _ Cleaner = Netlink{}

// DeleteUDP implements Cleaner.
func (c Netlink) DeleteUDP(_ context.Context, fam Family, flows []Flow) error {
	if len(flows) == 0 {
		return nil
	}
	filters := make([]netlink.CustomConntrackFilter, 0, len(flows))
	for _, fl := range flows {
		f := &netlink.ConntrackFilter{}
		err := errors.Join(
			f.AddProtocol(unix.IPPROTO_UDP),
			f.AddPort(netlink.ConntrackOrigDstPort, fl.Dst.Port()),
		)
		if !fl.NodePort {
			err = errors.Join(err, f.AddIP(netlink.ConntrackOrigDstIP, net.IP(fl.Dst.Addr().AsSlice())))
		}
		if fl.Endpoint.IsValid() {
			err = errors.Join(err, f.AddIP(netlink.ConntrackReplySrcIP, net.IP(fl.Endpoint.AsSlice())))
		}
		if err != nil {
			return fmt.Errorf("conntrack filter for %v: %w", fl, err)
		}
		filters = append(filters, f)
	}
	inet := netlink.InetFamily(unix.AF_INET)
	if fam == IPv6 {
		inet = netlink.InetFamily(unix.AF_INET6)
	}
	if _, err := c.Handle.ConntrackDeleteFilters(netlink.ConntrackTable, inet, filters...); err != nil {
		return fmt.Errorf("delete UDP conntrack entries: %w", err)
	}
	return nil
}
