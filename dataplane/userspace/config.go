package userspace

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"time"
)

// Bind says where a frontend's socket listens.
type Bind int

const (
	// BindServiceAddress listens on the service address itself (cluster,
	// external, load-balancer IP; node IP for node ports). Sockets are
	// opened with IP_FREEBIND, so the bind succeeds whether or not the
	// address is assigned on the node; traffic reaches the socket once the
	// address is local: assigned to an interface, or covered by a local
	// route (`ip route add local 10.96.0.0/12 dev lo`, no netfilter
	// involved). When the kernel still refuses the address
	// (EADDRNOTAVAIL, e.g. with Config.NoFreebind) and
	// Config.LocalAddress is set, the frontend falls back to a local port
	// as with BindLocalPort.
	BindServiceAddress Bind = iota
	// BindLocalPort listens on Config.LocalAddress with a kernel-chosen
	// port for every frontend. Something with netfilter privileges must
	// steer the service address to it with the REDIRECT rule that
	// Dataplane.Listeners and the log give (see doc.go); this mode never
	// touches netfilter itself.
	BindLocalPort
)

func (b Bind) String() string {
	switch b {
	case BindServiceAddress:
		return "service-address"
	case BindLocalPort:
		return "local-port"
	}
	return fmt.Sprintf("Bind(%d)", int(b))
}

// Defaults for zero Config fields.
const (
	DefaultDialTimeout       = time.Second
	DefaultUDPIdleTimeout    = 30 * time.Second
	DefaultMaxUDPSessions    = 4096
	DefaultUDPBufferSize     = 64 << 10
	defaultAffinitySweepTime = time.Minute
)

// Config configures a Dataplane. The zero value is valid: service
// addresses bound with IP_FREEBIND in the calling process's namespace.
type Config struct {
	// Context bounds the life of every proxy goroutine: when it is done,
	// every listener and proxied connection is closed, as by Cleanup.
	// Default context.Background() (the proxies live until Cleanup).
	Context context.Context
	// Sockets opens listeners and backend connections. Default
	// HostSockets (the calling process's network namespace).
	Sockets Sockets
	// Bind picks where frontends listen; default BindServiceAddress.
	Bind Bind
	// LocalAddress is the address local-port frontends listen on, e.g.
	// 0.0.0.0 so that a REDIRECT from PREROUTING (to the primary address
	// of the incoming interface) and from OUTPUT (to 127.0.0.1) both
	// reach it. Required with BindLocalPort; with BindServiceAddress it
	// enables the fallback. IPv6 frontends use :: when it is 0.0.0.0.
	LocalAddress netip.Addr
	// NoFreebind binds service addresses without IP_FREEBIND: only
	// addresses already local can be bound.
	NoFreebind bool
	// DialTimeout bounds one connection attempt to a backend; after it
	// the next backend is tried. Default DefaultDialTimeout.
	DialTimeout time.Duration
	// UDPIdleTimeout ends a client's UDP session (and frees its backend
	// socket) after this long without a datagram in either direction.
	// Default DefaultUDPIdleTimeout.
	UDPIdleTimeout time.Duration
	// MaxUDPSessions bounds the sessions of one UDP frontend; datagrams
	// of new clients beyond it are dropped. Default DefaultMaxUDPSessions.
	MaxUDPSessions int
	// Now is the clock of session affinity; default time.Now.
	Now func() time.Time
	// Logger receives listener changes, skips and proxy errors; nil
	// discards.
	Logger *slog.Logger
}

func (c Config) withDefaults() Config {
	if c.Context == nil {
		c.Context = context.Background()
	}
	if c.Sockets == nil {
		c.Sockets = HostSockets{}
	}
	if c.DialTimeout == 0 {
		c.DialTimeout = DefaultDialTimeout
	}
	if c.UDPIdleTimeout == 0 {
		c.UDPIdleTimeout = DefaultUDPIdleTimeout
	}
	if c.MaxUDPSessions == 0 {
		c.MaxUDPSessions = DefaultMaxUDPSessions
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	return c
}

func (c Config) validate() error {
	switch {
	case c.Bind != BindServiceAddress && c.Bind != BindLocalPort:
		return fmt.Errorf("unknown bind %v", c.Bind)
	case c.Bind == BindLocalPort && !c.LocalAddress.IsValid():
		return errors.New("bind local-port needs LocalAddress")
	case c.DialTimeout < 0 || c.UDPIdleTimeout < 0 || c.MaxUDPSessions < 0:
		return fmt.Errorf("negative timeout or limit (dial %v, udp idle %v, udp sessions %d)",
			c.DialTimeout, c.UDPIdleTimeout, c.MaxUDPSessions)
	}
	return nil
}

// localFor returns the local-port address for a frontend of addr's family.
func (c Config) localFor(addr netip.Addr) (netip.Addr, bool) {
	la := c.LocalAddress
	if !la.IsValid() {
		return netip.Addr{}, false
	}
	if addr.Is6() && la == netip.IPv4Unspecified() {
		return netip.IPv6Unspecified(), true
	}
	if addr.Is4() != la.Is4() {
		return netip.Addr{}, false
	}
	return la, true
}
