package ipvs

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"

	mobyipvs "github.com/moby/ipvs"
	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"

	"github.com/switchyard-proxy/switchyard/dataplane"
	"github.com/switchyard-proxy/switchyard/dataplane/command"
	"github.com/switchyard-proxy/switchyard/dataplane/conntrack"
)

// KernelConfig says which network namespace a NetlinkKernel programs.
type KernelConfig struct {
	// NetnsPath is a namespace file (/var/run/netns/NAME,
	// /proc/PID/ns/net). Empty means the namespace of the thread calling
	// NewKernel: a test may lock its goroutine to a thread, enter a
	// namespace and call NewKernel there; every later call, from any
	// goroutine, still goes to that namespace.
	NetnsPath string
	// ExecPrefix prefixes the ipset and iptables commands of Runner().
	// nil means none when NetnsPath is empty (the commands run in this
	// process's namespace) and "nsenter --net=NetnsPath" otherwise.
	ExecPrefix []string
}

// NetlinkKernel is the real Kernel: IPVS through github.com/moby/ipvs,
// links and addresses through a netlink handle, sysctls through /proc/sys,
// all in one namespace. It is safe for concurrent use.
type NetlinkKernel struct {
	ns     netns.NsHandle
	nl     *netlink.Handle
	prefix []string
	own    bool // ns is the process's own: nothing enters it

	mu   sync.Mutex // moby/ipvs handles are not safe for concurrent use
	ipvs *mobyipvs.Handle
}

var _ Kernel = (*NetlinkKernel)(nil)

// NewKernel opens netlink and IPVS handles in the namespace of cfg. It
// fails with an error wrapping ErrIPVSUnavailable when the kernel has no
// IPVS, so a node without it refuses the mode at start.
func NewKernel(cfg KernelConfig) (*NetlinkKernel, error) {
	var ns netns.NsHandle
	var err error
	if cfg.NetnsPath == "" {
		ns, err = netns.Get()
	} else {
		ns, err = netns.GetFromPath(cfg.NetnsPath)
	}
	if err != nil {
		return nil, fmt.Errorf("ipvs: open network namespace %q: %w", cfg.NetnsPath, err)
	}
	// NETLINK_ROUTE explicitly: NewHandleAt without families also opens
	// XFRM, which kernels without it refuse. NETFILTER for conntrack,
	// GENERIC for the IPVS family check. In the process's own namespace
	// (the agent's pod, on the host network) no handle enters it: setns
	// needs CAP_SYS_ADMIN, which the agent's container does not have
	// (NET_ADMIN and NET_RAW), and the mode failed to start there.
	families := []int{unix.NETLINK_ROUTE, unix.NETLINK_NETFILTER, unix.NETLINK_GENERIC}
	var nl *netlink.Handle
	ipvsNS := fmt.Sprintf("/proc/self/fd/%d", int(ns))
	if cfg.NetnsPath == "" {
		nl, err = netlink.NewHandle(families...)
		ipvsNS = "" // the calling thread's: every thread of the process is in it
	} else {
		nl, err = netlink.NewHandleAt(ns, families...)
	}
	if err != nil {
		ns.Close()
		return nil, fmt.Errorf("ipvs: netlink handle: %w", err)
	}
	k := &NetlinkKernel{ns: ns, nl: nl, prefix: cfg.ExecPrefix, own: cfg.NetnsPath == ""}
	if k.prefix == nil && cfg.NetnsPath != "" {
		k.prefix = []string{"nsenter", "--net=" + cfg.NetnsPath}
	}
	if err := k.CheckIPVS(context.Background()); err != nil {
		k.Close()
		return nil, err
	}
	// moby/ipvs opens its socket in the namespace of a path (entering it),
	// or of the calling thread when the path is empty; /proc/self/fd/N
	// names another namespace whichever thread runs this.
	h, err := mobyipvs.New(ipvsNS)
	if err != nil {
		k.Close()
		return nil, fmt.Errorf("ipvs: open IPVS handle: %w", err)
	}
	k.ipvs = h
	return k, nil
}

// Close releases the handles.
func (k *NetlinkKernel) Close() {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.ipvs != nil {
		k.ipvs.Close()
		k.ipvs = nil
	}
	if k.nl != nil {
		k.nl.Close()
		k.nl = nil
	}
	k.ns.Close()
}

// Handle is the netlink handle of the namespace, e.g. for
// conntrack.Netlink.
func (k *NetlinkKernel) Handle() *netlink.Handle { return k.nl }

// Runner runs ipset and iptables in the namespace.
func (k *NetlinkKernel) Runner() command.Runner { return command.ExecRunner{Prefix: k.prefix} }

// Config returns base with Kernel, Runner and Conntrack set to this
// namespace's real seams where base leaves them nil.
func (k *NetlinkKernel) Config(base Config) Config {
	if base.Kernel == nil {
		base.Kernel = k
	}
	if base.Runner == nil {
		base.Runner = k.Runner()
	}
	if base.Conntrack == nil {
		base.Conntrack = conntrack.Netlink{Handle: k.nl}
	}
	return base
}

// CheckIPVS implements Kernel.
func (k *NetlinkKernel) CheckIPVS(context.Context) error {
	if _, err := k.nl.GenlFamilyGet("IPVS"); err != nil {
		return fmt.Errorf("%w: %v", ErrIPVSUnavailable, err)
	}
	return nil
}

func family(a netip.Addr) uint16 {
	if a.Is4() {
		return unix.AF_INET
	}
	return unix.AF_INET6
}

func toMobyService(k VSKey) *mobyipvs.Service {
	s := &mobyipvs.Service{
		Address: net.IP(k.Addr.AsSlice()), Port: k.Port, Protocol: uint16(k.Protocol),
		AddressFamily: family(k.Addr), Netmask: 0xffffffff,
	}
	if k.Addr.Is6() {
		s.Netmask = 128
	}
	return s
}

const (
	flagPersistent = 0x1  // IP_VS_SVC_F_PERSISTENT
	flagHashed     = 0x2  // IP_VS_SVC_F_HASHED: set by the kernel in dumps
	flagSchedPort  = 0x10 // IP_VS_SVC_F_SCHED2: mh-port and sh-port
)

func toMobyVS(vs VirtualServer) *mobyipvs.Service {
	s := toMobyService(vs.Key)
	s.SchedName = vs.Scheduler
	if vs.Timeout > 0 {
		s.Flags, s.Timeout = flagPersistent, vs.Timeout
	}
	if vs.HashPort {
		s.Flags |= flagSchedPort
	}
	return s
}

func addrOf(ip net.IP) (netip.Addr, bool) {
	a, ok := netip.AddrFromSlice(ip)
	return a.Unmap(), ok
}

// VirtualServers implements Kernel. Fwmark services are not ours and are
// left out.
func (k *NetlinkKernel) VirtualServers(context.Context) ([]VirtualServer, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	svcs, err := k.ipvs.GetServices()
	if err != nil {
		return nil, fmt.Errorf("list virtual servers: %w", err)
	}
	out := make([]VirtualServer, 0, len(svcs))
	for _, s := range svcs {
		a, ok := addrOf(s.Address)
		if s.FWMark != 0 || !ok {
			continue
		}
		vs := VirtualServer{Key: VSKey{Addr: a, Port: s.Port, Protocol: dataplane.Protocol(s.Protocol)}, Scheduler: s.SchedName}
		if s.Flags&flagPersistent != 0 {
			vs.Timeout = s.Timeout
		}
		vs.HashPort = s.Flags&flagSchedPort != 0
		out = append(out, vs)
	}
	return out, nil
}

// AddVirtualServer implements Kernel.
func (k *NetlinkKernel) AddVirtualServer(_ context.Context, vs VirtualServer) error {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.ipvs.NewService(toMobyVS(vs))
}

// UpdateVirtualServer implements Kernel.
func (k *NetlinkKernel) UpdateVirtualServer(_ context.Context, vs VirtualServer) error {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.ipvs.UpdateService(toMobyVS(vs))
}

// DeleteVirtualServer implements Kernel.
func (k *NetlinkKernel) DeleteVirtualServer(_ context.Context, key VSKey) error {
	k.mu.Lock()
	defer k.mu.Unlock()
	return ignoreGone(k.ipvs.DelService(toMobyService(key)))
}

// RealServers implements Kernel.
func (k *NetlinkKernel) RealServers(_ context.Context, key VSKey) ([]RealServer, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	dsts, err := k.ipvs.GetDestinations(toMobyService(key))
	if err != nil {
		return nil, fmt.Errorf("list real servers of %s: %w", key, err)
	}
	out := make([]RealServer, 0, len(dsts))
	for _, d := range dsts {
		a, ok := addrOf(d.Address)
		if !ok {
			continue
		}
		out = append(out, RealServer{Addr: netip.AddrPortFrom(a, d.Port), Weight: d.Weight,
			ActiveConns: d.ActiveConnections, InactiveConns: d.InactiveConnections})
	}
	return out, nil
}

func toMobyDest(rs RealServer) *mobyipvs.Destination {
	return &mobyipvs.Destination{
		Address: net.IP(rs.Addr.Addr().AsSlice()), Port: rs.Addr.Port(), Weight: rs.Weight,
		ConnectionFlags: mobyipvs.ConnectionFlagMasq, AddressFamily: family(rs.Addr.Addr()),
	}
}

// AddRealServer implements Kernel.
func (k *NetlinkKernel) AddRealServer(_ context.Context, key VSKey, rs RealServer) error {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.ipvs.NewDestination(toMobyService(key), toMobyDest(rs))
}

// UpdateRealServer implements Kernel.
func (k *NetlinkKernel) UpdateRealServer(_ context.Context, key VSKey, rs RealServer) error {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.ipvs.UpdateDestination(toMobyService(key), toMobyDest(rs))
}

// DeleteRealServer implements Kernel.
func (k *NetlinkKernel) DeleteRealServer(_ context.Context, key VSKey, addr netip.AddrPort) error {
	k.mu.Lock()
	defer k.mu.Unlock()
	return ignoreGone(k.ipvs.DelDestination(toMobyService(key), toMobyDest(RealServer{Addr: addr})))
}

// ignoreGone drops the errors of deleting what is already gone.
func ignoreGone(err error) error {
	if errors.Is(err, unix.ENOENT) || errors.Is(err, unix.ESRCH) || errors.Is(err, unix.EADDRNOTAVAIL) {
		return nil
	}
	return err
}

func isLinkNotFound(err error) bool {
	var nf netlink.LinkNotFoundError
	return errors.As(err, &nf) || errors.Is(err, unix.ENODEV)
}

// EnsureDummy implements Kernel.
func (k *NetlinkKernel) EnsureDummy(_ context.Context, name string) error {
	l, err := k.nl.LinkByName(name)
	if isLinkNotFound(err) {
		d := &netlink.Dummy{LinkAttrs: netlink.LinkAttrs{Name: name}}
		if err := k.nl.LinkAdd(d); err != nil && !errors.Is(err, unix.EEXIST) {
			return fmt.Errorf("add dummy link %s (does the kernel have CONFIG_DUMMY?): %w", name, err)
		}
		l, err = k.nl.LinkByName(name)
	}
	if err != nil {
		return fmt.Errorf("link %s: %w", name, err)
	}
	if l.Type() != "dummy" {
		return fmt.Errorf("link %s exists and is a %s, not a dummy", name, l.Type())
	}
	if l.Attrs().Flags&net.FlagUp == 0 {
		if err := k.nl.LinkSetUp(l); err != nil {
			return fmt.Errorf("set %s up: %w", name, err)
		}
	}
	return nil
}

// DeleteLink implements Kernel.
func (k *NetlinkKernel) DeleteLink(_ context.Context, name string) error {
	l, err := k.nl.LinkByName(name)
	if isLinkNotFound(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("link %s: %w", name, err)
	}
	return k.nl.LinkDel(l)
}

// Addresses implements Kernel.
func (k *NetlinkKernel) Addresses(_ context.Context, name string) ([]netip.Addr, error) {
	l, err := k.nl.LinkByName(name)
	if isLinkNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("link %s: %w", name, err)
	}
	addrs, err := k.nl.AddrList(l, netlink.FAMILY_ALL)
	if err != nil {
		return nil, fmt.Errorf("addresses of %s: %w", name, err)
	}
	out := make([]netip.Addr, 0, len(addrs))
	for _, a := range addrs {
		if ip, ok := addrOf(a.IP); ok && !ip.IsLinkLocalUnicast() {
			out = append(out, ip)
		}
	}
	return out, nil
}

func hostAddr(a netip.Addr) *netlink.Addr {
	return &netlink.Addr{IPNet: &net.IPNet{IP: net.IP(a.AsSlice()), Mask: net.CIDRMask(a.BitLen(), a.BitLen())}}
}

// AddAddress implements Kernel.
func (k *NetlinkKernel) AddAddress(_ context.Context, name string, a netip.Addr) error {
	l, err := k.nl.LinkByName(name)
	if err != nil {
		return fmt.Errorf("link %s: %w", name, err)
	}
	if err := k.nl.AddrAdd(l, hostAddr(a)); err != nil && !errors.Is(err, unix.EEXIST) {
		return fmt.Errorf("add %s to %s: %w", a, name, err)
	}
	return nil
}

// DeleteAddress implements Kernel.
func (k *NetlinkKernel) DeleteAddress(_ context.Context, name string, a netip.Addr) error {
	l, err := k.nl.LinkByName(name)
	if isLinkNotFound(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("link %s: %w", name, err)
	}
	if err := ignoreGone(k.nl.AddrDel(l, hostAddr(a))); err != nil {
		return fmt.Errorf("delete %s from %s: %w", a, name, err)
	}
	return nil
}

func sysctlPath(name string) string {
	return filepath.Join("/proc/sys", strings.ReplaceAll(name, ".", "/"))
}

// Sysctl implements Kernel.
func (k *NetlinkKernel) Sysctl(_ context.Context, name string) (string, error) {
	var v string
	err := k.inNetns(func() error {
		b, err := os.ReadFile(sysctlPath(name))
		v = strings.TrimSpace(string(b))
		return err
	})
	return v, err
}

// SetSysctl implements Kernel.
func (k *NetlinkKernel) SetSysctl(_ context.Context, name, value string) error {
	return k.inNetns(func() error { return os.WriteFile(sysctlPath(name), []byte(value), 0o644) })
}

// inNetns runs fn on a thread in the kernel's namespace: /proc/sys/net
// shows the namespace of the thread that opens it. The thread is never
// unlocked, so Go discards it afterwards instead of reusing a thread whose
// namespace we changed. In the process's own namespace fn runs as it is
// (entering needs CAP_SYS_ADMIN).
func (k *NetlinkKernel) inNetns(fn func() error) error {
	if k.own {
		return fn()
	}
	done := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		if err := netns.Set(k.ns); err != nil {
			done <- fmt.Errorf("enter network namespace: %w", err)
			return
		}
		done <- fn()
	}()
	return <-done
}
