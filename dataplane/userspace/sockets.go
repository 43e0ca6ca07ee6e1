package userspace

import (
	"context"
	"fmt"
	"net"
	"net/netip"
)

// Sockets is the mode's only seam to the kernel: it opens the frontends'
// listening sockets and the connections to backends. HostSockets opens
// them in the calling process's network namespace; tests substitute one
// that opens them in a test namespace, or injects failures.
type Sockets interface {
	// ListenTCP opens a TCP listener on addr. freebind asks for
	// IP_FREEBIND (bind an address not assigned locally).
	ListenTCP(ctx context.Context, addr netip.AddrPort, freebind bool) (*net.TCPListener, error)
	// ListenUDP opens a UDP socket bound to addr.
	ListenUDP(ctx context.Context, addr netip.AddrPort, freebind bool) (*net.UDPConn, error)
	// DialTCP connects to a backend.
	DialTCP(ctx context.Context, dst netip.AddrPort) (*net.TCPConn, error)
	// DialUDP opens a UDP socket connected to a backend.
	DialUDP(ctx context.Context, dst netip.AddrPort) (*net.UDPConn, error)
}

// HostSockets opens sockets in the calling process's network namespace.
type HostSockets struct{}

var _ Sockets = HostSockets{}

// ListenTCP implements Sockets.
func (HostSockets) ListenTCP(ctx context.Context, addr netip.AddrPort, freebind bool) (*net.TCPListener, error) {
	lc := net.ListenConfig{Control: socketControl(freebind)}
	ln, err := lc.Listen(ctx, network("tcp", addr.Addr()), addr.String())
	if err != nil {
		return nil, err
	}
	tl, ok := ln.(*net.TCPListener)
	if !ok {
		ln.Close()
		return nil, fmt.Errorf("listen tcp %s: got %T", addr, ln)
	}
	return tl, nil
}

// ListenUDP implements Sockets.
func (HostSockets) ListenUDP(ctx context.Context, addr netip.AddrPort, freebind bool) (*net.UDPConn, error) {
	lc := net.ListenConfig{Control: socketControl(freebind)}
	pc, err := lc.ListenPacket(ctx, network("udp", addr.Addr()), addr.String())
	if err != nil {
		return nil, err
	}
	uc, ok := pc.(*net.UDPConn)
	if !ok {
		pc.Close()
		return nil, fmt.Errorf("listen udp %s: got %T", addr, pc)
	}
	return uc, nil
}

// DialTCP implements Sockets.
func (HostSockets) DialTCP(ctx context.Context, dst netip.AddrPort) (*net.TCPConn, error) {
	var d net.Dialer
	c, err := d.DialContext(ctx, network("tcp", dst.Addr()), dst.String())
	if err != nil {
		return nil, err
	}
	return c.(*net.TCPConn), nil
}

// DialUDP implements Sockets.
func (HostSockets) DialUDP(ctx context.Context, dst netip.AddrPort) (*net.UDPConn, error) {
	var d net.Dialer
	c, err := d.DialContext(ctx, network("udp", dst.Addr()), dst.String())
	if err != nil {
		return nil, err
	}
	return c.(*net.UDPConn), nil
}

// network names the family explicitly: "tcp6" on [::] makes a v6-only
// socket, so the IPv4 and IPv6 wildcard node-port listeners of one port
// do not collide as a dual-stack socket would.
func network(proto string, a netip.Addr) string {
	if a.Is4() {
		return proto + "4"
	}
	return proto + "6"
}
