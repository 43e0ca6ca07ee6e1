package userspace

import (
	"syscall"

	"golang.org/x/sys/unix"
)

// socketControl sets IP_FREEBIND (IPV6_FREEBIND) before bind when asked:
// it lets an unprivileged process bind an address the node does not (yet)
// hold, unlike IP_TRANSPARENT, which needs CAP_NET_ADMIN.
func socketControl(freebind bool) func(network, address string, c syscall.RawConn) error {
	if !freebind {
		return nil
	}
	return func(network, _ string, c syscall.RawConn) error {
		var serr error
		err := c.Control(func(fd uintptr) {
			level, opt := unix.IPPROTO_IP, unix.IP_FREEBIND
			if network == "tcp6" || network == "udp6" {
				level, opt = unix.IPPROTO_IPV6, unix.IPV6_FREEBIND
			}
			serr = unix.SetsockoptInt(int(fd), level, opt, 1)
		})
		if err != nil {
			return err
		}
		return serr
	}
}
