package userspace

import (
	"context"
	"fmt"
	"io"
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
	return opened[*net.TCPListener](ln, err, "listen tcp", addr)
}

// ListenUDP implements Sockets.
func (HostSockets) ListenUDP(ctx context.Context, addr netip.AddrPort, freebind bool) (*net.UDPConn, error) {
	lc := net.ListenConfig{Control: socketControl(freebind)}
	pc, err := lc.ListenPacket(ctx, network("udp", addr.Addr()), addr.String())
	return opened[*net.UDPConn](pc, err, "listen udp", addr)
}

// DialTCP implements Sockets.
func (HostSockets) DialTCP(ctx context.Context, dst netip.AddrPort) (*net.TCPConn, error) {
	var d net.Dialer
	c, err := d.DialContext(ctx, network("tcp", dst.Addr()), dst.String())
	return opened[*net.TCPConn](c, err, "dial tcp", dst)
}

// DialUDP implements Sockets.
func (HostSockets) DialUDP(ctx context.Context, dst netip.AddrPort) (*net.UDPConn, error) {
	var d net.Dialer
	c, err := d.DialContext(ctx, network("udp", dst.Addr()), dst.String())
	return opened[*net.UDPConn](c, err, "dial udp", dst)
}

// opened returns the socket a listen or dial (op, of addr) opened as the
// type the Sockets method promises. The net package always opens that
// type for an explicit "tcp4"/"udp6" network; were it ever another, the
// socket is closed rather than leaked.
func opened[T io.Closer](c io.Closer, err error, op string, addr netip.AddrPort) (T, error) {
	var zero T
	if err != nil {
		return zero, err
	}
	t, ok := c.(T)
	if !ok {
		c.Close()
		return zero, fmt.Errorf("%s %s: got %T", op, addr, c)
	}
	return t, nil
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
