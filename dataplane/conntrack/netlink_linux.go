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

var (
	_ Cleaner = Netlink{}
	_ Table   = Netlink{}
)

// DeleteUDP implements Cleaner.
func (c Netlink) DeleteUDP(_ context.Context, fam dataplane.Family, flows []Flow) error {
	if len(flows) == 0 {
		return nil
	}
	filters := make([]netlink.CustomConntrackFilter, 0, len(flows))
	for _, fl := range flows {
		filters = append(filters, udpFilter(fl))
	}
	if _, err := c.Handle.ConntrackDeleteFilters(netlink.ConntrackTable, inetFamily(fam), filters...); err != nil {
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

func inetFamily(fam dataplane.Family) netlink.InetFamily {
	if fam == dataplane.IPv6 {
		return netlink.InetFamily(unix.AF_INET6)
	}
	return netlink.InetFamily(unix.AF_INET)
}

// ListUDP implements Table: one dump of fam's table, UDP kept. The
// kernel dumps every protocol; filtering here keeps to netlink's
// ConntrackTableList.
func (c Netlink) ListUDP(ctx context.Context, fam dataplane.Family) ([]Entry, error) {
	flows, err := c.Handle.ConntrackTableList(netlink.ConntrackTable, inetFamily(fam))
	if err != nil {
		return nil, fmt.Errorf("dump conntrack table: %w", err)
	}
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("dump conntrack table: %w", err)
	}
	out := make([]Entry, 0, len(flows))
	for _, f := range flows {
		if e, ok := entryOf(f); ok {
			out = append(out, e)
		}
	}
	return out, nil
}

// entryOf reads a UDP flow; ok is false for other protocols and for a
// flow whose addresses do not parse.
func entryOf(f *netlink.ConntrackFlow) (Entry, bool) {
	if f.Forward.Protocol != unix.IPPROTO_UDP {
		return Entry{}, false
	}
	src, ok1 := netip.AddrFromSlice(f.Forward.SrcIP)
	dst, ok2 := netip.AddrFromSlice(f.Forward.DstIP)
	rep, ok3 := netip.AddrFromSlice(f.Reverse.SrcIP)
	if !ok1 || !ok2 || !ok3 {
		return Entry{}, false
	}
	return Entry{
		Src:   netip.AddrPortFrom(src.Unmap(), f.Forward.SrcPort),
		Dst:   netip.AddrPortFrom(dst.Unmap(), f.Forward.DstPort),
		Reply: netip.AddrPortFrom(rep.Unmap(), f.Reverse.SrcPort),
	}, true
}

// DeleteEntries implements Table. netlink dumps the table again and
// deletes each entry that matches one given by its original tuple and
// reply source, sending the kernel the entry as dumped (its id
// included): an entry the client re-created since, DNATed elsewhere,
// does not match and stays.
func (c Netlink) DeleteEntries(_ context.Context, fam dataplane.Family, entries []Entry) (int, error) {
	if len(entries) == 0 {
		return 0, nil
	}
	set := make(entrySet, len(entries))
	for _, e := range entries {
		set[e] = struct{}{}
	}
	n, err := c.Handle.ConntrackDeleteFilters(netlink.ConntrackTable, inetFamily(fam), set)
	if err != nil {
		return int(n), fmt.Errorf("delete conntrack entries: %w", err)
	}
	return int(n), nil
}

// entrySet matches the flows of a set of entries.
type entrySet map[Entry]struct{}

func (s entrySet) MatchConntrackFlow(f *netlink.ConntrackFlow) bool {
	e, ok := entryOf(f)
	if !ok {
		return false
	}
	_, ok = s[e]
	return ok
}
