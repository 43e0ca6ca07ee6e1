package netns

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"strings"
	"time"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
	"golang.org/x/sync/errgroup"
	"golang.org/x/sys/unix"
)

// noDAD turns off IPv6 duplicate address detection in a namespace for the
// links created after it. The plan makes every address unique, and a
// tentative address (a second or two after the link comes up) can be
// neither bound nor used to resolve neighbours: the first connections of
// a test would time out. Addresses the plan assigns carry IFA_F_NODAD as
// well (addAddrs); this covers the link-local ones the kernel adds.
var noDAD = []Sysctl{{"net.ipv6.conf.all.accept_dad", "0"}, {"net.ipv6.conf.default.accept_dad", "0"}}

// linkUpTimeout bounds the wait for veth carriers after wiring.
const linkUpTimeout = 5 * time.Second

// build creates every namespace of the plan and wires them.
func (t *Topology) build(ctx context.Context) error {
	names := t.plan.Namespaces()
	if err := t.createNamespaces(ctx, names); err != nil {
		return err
	}
	if t.plan.DualStack() {
		// Before any link exists, so that link-local addresses skip it too.
		for _, ns := range names {
			if err := t.SetSysctls(ns, noDAD...); err != nil {
				return err
			}
		}
	}
	hs, err := t.openHandles(names)
	if err != nil {
		return err
	}
	defer hs.close()
	if err := t.wire(hs); err != nil {
		return err
	}
	if err := t.applySysctls(); err != nil {
		return err
	}
	return waitVethsUp(ctx, hs)
}

// createNamespaces runs `ip netns add` for every name. The first one runs
// alone: on a fresh machine it sets up the /run/netns mount, which parallel
// first-time calls could race on.
func (t *Topology) createNamespaces(ctx context.Context, names []string) error {
	if err := t.addNamespace(ctx, names[0]); err != nil {
		return err
	}
	// No shared cancellation: killing an `ip netns add` half-way could leave
	// an unrecorded file behind; every started add runs to completion.
	var g errgroup.Group
	g.SetLimit(8)
	for _, name := range names[1:] {
		g.Go(func() error { return t.addNamespace(ctx, name) })
	}
	return g.Wait()
}

func (t *Topology) addNamespace(ctx context.Context, name string) error {
	path := nsPath(name)
	if _, err := os.Lstat(path); err == nil {
		return fmt.Errorf("namespace %s already exists (id collision or leftover from a killed run)", name)
	}
	out, err := exec.CommandContext(ctx, "ip", "netns", "add", name).CombinedOutput()
	if err != nil {
		return fmt.Errorf("ip netns add %s: %w: %s", name, err, strings.TrimSpace(string(out)))
	}
	t.mu.Lock()
	t.created = append(t.created, name)
	t.mu.Unlock()
	id, err := statNS(path)
	if err != nil {
		return err
	}
	if err := t.guard.check(id, path); err != nil {
		return err
	}
	t.mu.Lock()
	t.members[name] = member{path: path, id: id}
	t.mu.Unlock()
	if err := t.checkFresh(name); err != nil {
		t.mu.Lock()
		delete(t.members, name)
		t.mu.Unlock()
		return err
	}
	return nil
}

// checkFresh verifies that a just-created namespace holds nothing but lo: a
// second proof, independent of inode bookkeeping, that it is not the
// machine's namespace.
func (t *Topology) checkFresh(name string) error {
	return t.Do(name, func() error {
		ifs, err := net.Interfaces()
		if err != nil {
			return fmt.Errorf("list interfaces: %w", err)
		}
		if len(ifs) != 1 || ifs[0].Name != "lo" {
			names := make([]string, 0, len(ifs))
			for _, i := range ifs {
				names = append(names, i.Name)
			}
			return fmt.Errorf("new namespace is not empty (interfaces %v): %w", names, ErrHostNamespace)
		}
		return nil
	})
}

// handles holds, per namespace, an open descriptor (to place veth peers) and
// a NETLINK_ROUTE handle whose socket was created inside it.
type handles struct {
	nl map[string]*netlink.Handle
	fd map[string]netns.NsHandle
}

func (t *Topology) openHandles(names []string) (*handles, error) {
	hs := &handles{nl: map[string]*netlink.Handle{}, fd: map[string]netns.NsHandle{}}
	for _, name := range names {
		fd, err := t.openMember(name)
		if err != nil {
			hs.close()
			return nil, err
		}
		hs.fd[name] = fd
		// Create the socket through Do rather than netlink.NewHandleAt: Do
		// never returns a thread to the scheduler unless it was restored.
		var h *netlink.Handle
		err = t.Do(name, func() error {
			var err error
			h, err = netlink.NewHandle(unix.NETLINK_ROUTE)
			return err
		})
		if err != nil {
			hs.close()
			return nil, fmt.Errorf("netlink handle: %w", err)
		}
		hs.nl[name] = h
	}
	return hs, nil
}

func (hs *handles) close() {
	for _, h := range hs.nl {
		h.Close()
	}
	for _, fd := range hs.fd {
		fd.Close()
	}
}

// wire creates bridges, veth pairs, addresses and routes.
func (t *Topology) wire(hs *handles) error {
	p := t.plan
	for name, h := range hs.nl {
		if err := setUpByName(h, "lo"); err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
	}
	netH := hs.nl[p.Network.NS]
	br, err := addBridge(netH, p.Network.Bridge)
	if err != nil {
		return fmt.Errorf("%s: %w", p.Network.NS, err)
	}
	for _, n := range p.Nodes {
		uplink := ifAddrs(n.IP, n.Subnet, n.IP6, n.Subnet6)
		if err := attach(netH, br, n.NetPort, false, hs.fd[n.NS], hs.nl[n.NS], uplink...); err != nil {
			return fmt.Errorf("attach %s to the network: %w", n.Name, err)
		}
		if t.plan.NoPodBridge {
			continue
		}
		cbr, err := addBridge(hs.nl[n.NS], NodeBridge, ifAddrs(n.PodGateway, n.PodCIDR, n.PodGateway6, n.PodCIDR6)...)
		if err != nil {
			return fmt.Errorf("%s: %w", n.NS, err)
		}
		for _, pod := range n.Pods {
			addrs := ifAddrs(pod.IP, pod.Subnet, pod.IP6, pod.Subnet6)
			if err := attach(hs.nl[n.NS], cbr, pod.NodePort, true, hs.fd[pod.NS], hs.nl[pod.NS], addrs...); err != nil {
				return fmt.Errorf("attach %s to %s: %w", pod.Name, n.Name, err)
			}
		}
	}
	for _, h := range []Host{p.Client, p.Control} {
		addrs := ifAddrs(h.IP, h.Subnet, h.IP6, h.Subnet6)
		if err := attach(netH, br, h.NetPort, false, hs.fd[h.NS], hs.nl[h.NS], addrs...); err != nil {
			return fmt.Errorf("attach %s to the network: %w", h.Name, err)
		}
	}
	return addAllRoutes(p, hs)
}

func addAllRoutes(p Plan, hs *handles) error {
	set := map[string][]Route{p.Client.NS: p.Client.Routes, p.Control.NS: p.Control.Routes}
	for _, n := range p.Nodes {
		set[n.NS] = n.Routes
		for _, pod := range n.Pods {
			set[pod.NS] = pod.Routes
		}
	}
	for ns, routes := range set {
		if err := addRoutes(hs.nl[ns], routes); err != nil {
			return fmt.Errorf("%s: %w", ns, err)
		}
	}
	return nil
}

// addBridge creates an STP-less bridge (ports forward at once) with the
// given addresses, and sets it up. Multicast snooping is off: a plain
// switch floods IPv6 neighbour solicitations to every port instead of
// waiting for MLD reports to learn who listens.
func addBridge(h *netlink.Handle, name string, addrs ...netip.Prefix) (netlink.Link, error) {
	snooping := false
	if err := h.LinkAdd(&netlink.Bridge{LinkAttrs: netlink.LinkAttrs{Name: name}, MulticastSnooping: &snooping}); err != nil {
		return nil, fmt.Errorf("add bridge %s: %w", name, err)
	}
	br, err := h.LinkByName(name)
	if err != nil {
		return nil, fmt.Errorf("bridge %s: %w", name, err)
	}
	if err := addAddrs(h, br, addrs); err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	if err := h.LinkSetUp(br); err != nil {
		return nil, fmt.Errorf("set %s up: %w", name, err)
	}
	return br, nil
}

// attach creates a veth pair inside the namespace of outer: port is enslaved
// to br there, its peer Uplink is created directly in inner's namespace (so
// no interface ever exists in the host namespace) and gets addrs.
func attach(outer *netlink.Handle, br netlink.Link, port string, hairpin bool,
	innerFD netns.NsHandle, inner *netlink.Handle, addrs ...netip.Prefix) error {
	veth := &netlink.Veth{
		LinkAttrs:     netlink.LinkAttrs{Name: port},
		PeerName:      Uplink,
		PeerNamespace: netlink.NsFd(int(innerFD)),
	}
	if err := outer.LinkAdd(veth); err != nil {
		return fmt.Errorf("add veth %s: %w", port, err)
	}
	link, err := outer.LinkByName(port)
	if err != nil {
		return fmt.Errorf("veth %s: %w", port, err)
	}
	if err := outer.LinkSetMaster(link, br); err != nil {
		return fmt.Errorf("enslave %s to %s: %w", port, br.Attrs().Name, err)
	}
	if hairpin {
		if err := outer.LinkSetHairpin(link, true); err != nil {
			return fmt.Errorf("hairpin on %s: %w", port, err)
		}
	}
	if err := outer.LinkSetUp(link); err != nil {
		return fmt.Errorf("set %s up: %w", port, err)
	}
	in, err := inner.LinkByName(Uplink)
	if err != nil {
		return fmt.Errorf("peer %s of %s: %w", Uplink, port, err)
	}
	if err := addAddrs(inner, in, addrs); err != nil {
		return fmt.Errorf("peer of %s: %w", port, err)
	}
	if err := inner.LinkSetUp(in); err != nil {
		return fmt.Errorf("set peer of %s up: %w", port, err)
	}
	return nil
}

// ifAddrs are the interface addresses ip/subnet and, when valid (a
// dual-stack plan), ip6/subnet6.
func ifAddrs(ip netip.Addr, subnet netip.Prefix, ip6 netip.Addr, subnet6 netip.Prefix) []netip.Prefix {
	out := []netip.Prefix{netip.PrefixFrom(ip, subnet.Bits())}
	if ip6.IsValid() {
		out = append(out, netip.PrefixFrom(ip6, subnet6.Bits()))
	}
	return out
}

// addAddrs adds addrs to link. IPv6 addresses skip duplicate address
// detection (IFA_F_NODAD): the plan already made them unique, and a
// tentative address cannot be bound or used as a source for a second or
// more, which every test would have to wait out.
func addAddrs(h *netlink.Handle, link netlink.Link, addrs []netip.Prefix) error {
	for _, a := range addrs {
		na := &netlink.Addr{IPNet: ipNet(a)}
		if a.Addr().Is6() {
			na.Flags = unix.IFA_F_NODAD
		}
		if err := h.AddrAdd(link, na); err != nil {
			return fmt.Errorf("address %s: %w", a, err)
		}
	}
	return nil
}

func setUpByName(h *netlink.Handle, name string) error {
	link, err := h.LinkByName(name)
	if err != nil {
		return fmt.Errorf("link %s: %w", name, err)
	}
	if err := h.LinkSetUp(link); err != nil {
		return fmt.Errorf("set %s up: %w", name, err)
	}
	return nil
}

func addRoutes(h *netlink.Handle, routes []Route) error {
	for _, r := range routes {
		link, err := h.LinkByName(r.Dev)
		if err != nil {
			return fmt.Errorf("route %s: %w", r, err)
		}
		nr := &netlink.Route{LinkIndex: link.Attrs().Index, Dst: ipNet(r.Dst)}
		if r.Via.IsValid() {
			nr.Gw = net.IP(r.Via.AsSlice())
		} else {
			nr.Scope = netlink.SCOPE_LINK
		}
		if err := h.RouteAdd(nr); err != nil {
			return fmt.Errorf("route %s: %w", r, err)
		}
	}
	return nil
}

// waitVethsUp polls until every veth of the topology reports carrier.
func waitVethsUp(ctx context.Context, hs *handles) error {
	ctx, cancel := context.WithTimeout(ctx, linkUpTimeout)
	defer cancel()
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for {
		down, err := vethsDown(hs)
		if err != nil || len(down) == 0 {
			return err
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("links still down: %s: %w", strings.Join(down, ", "), ctx.Err())
		case <-tick.C:
		}
	}
}

func vethsDown(hs *handles) ([]string, error) {
	var down []string
	for ns, h := range hs.nl {
		links, err := h.LinkList()
		if err != nil {
			return nil, fmt.Errorf("%s: list links: %w", ns, err)
		}
		for _, l := range links {
			if l.Type() == "veth" && l.Attrs().OperState != netlink.OperUp {
				down = append(down, ns+"/"+l.Attrs().Name)
			}
		}
	}
	return down, nil
}

// ipNet converts an interface address (host bits kept) for netlink.
func ipNet(p netip.Prefix) *net.IPNet {
	bits := p.Addr().BitLen()
	return &net.IPNet{IP: net.IP(p.Addr().AsSlice()), Mask: net.CIDRMask(p.Bits(), bits)}
}
