package probe

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"sync"
	"time"
)

// DefaultTimeout is the per-attempt timeout.
const DefaultTimeout = 500 * time.Millisecond

// defaultPayload is sent in each UDP datagram.
var defaultPayload = []byte("probe")

// Runner runs fn on a thread inside the network namespace ns.
// *netns.Topology implements it.
type Runner interface {
	Do(ns string, fn func() error) error
}

// Prober makes attempts from one namespace.
type Prober struct {
	runner Runner
	ns     string
}

// New returns a prober for namespace ns.
func New(r Runner, ns string) *Prober { return &Prober{runner: r, ns: ns} }

// Options tune TCP and UDP runs. The zero value makes one attempt.
type Options struct {
	// Count is the number of attempts (default 1).
	Count int
	// Timeout bounds each attempt (default DefaultTimeout).
	Timeout time.Duration
	// Parallel is the number of concurrent attempts (default 1).
	Parallel int
	// ReuseSocket sends every UDP exchange from one socket, so from one
	// source port (one conntrack entry). Forces Parallel to 1. A reply that
	// arrives after its attempt timed out may be counted for the next one.
	ReuseSocket bool
	// Payload is the UDP datagram (default "probe").
	Payload []byte
	// DistinctSources keeps each UDP attempt's socket open until every
	// attempt is done, so each gets its own source port: the kernel hands
	// a closed socket's port out again at once, and a proxy that keys
	// sessions by client address would count two attempts as one session
	// (the userspace mode's exact round-robin test over 30 sockets failed
	// that way in CI).
	DistinctSources bool
	// Source binds every TCP attempt to this address and port (one
	// client tuple, as a hashing balancer sees it). Forces Parallel to
	// 1; each connection ends with a reset instead of a FIN, so the tuple
	// leaves no TIME_WAIT and the next attempt can use it at once.
	Source netip.AddrPort
}

func (o Options) withDefaults() Options {
	if o.Count == 0 {
		o.Count = 1
	}
	if o.Timeout == 0 {
		o.Timeout = DefaultTimeout
	}
	if o.Parallel == 0 || o.ReuseSocket || o.Source.IsValid() {
		o.Parallel = 1
	}
	if o.Payload == nil {
		o.Payload = defaultPayload
	}
	return o
}

func (o Options) validate() error {
	if o.Count < 0 || o.Timeout < 0 || o.Parallel < 0 {
		return fmt.Errorf("probe: negative option in %+v", o)
	}
	return nil
}

// runnerError marks a failure of the Runner, which aborts a run.
type runnerError struct{ err error }

func (e *runnerError) Error() string { return "probe: " + e.err.Error() }
func (e *runnerError) Unwrap() error { return e.err }

// attemptFunc makes one attempt and returns the raw reply.
type attemptFunc func(ctx context.Context) ([]byte, error)

// TCP opens opts.Count connections to addr and reads each reply line.
func (p *Prober) TCP(ctx context.Context, addr netip.AddrPort, opts Options) (Result, error) {
	opts = opts.withDefaults()
	if err := opts.validate(); err != nil {
		return Result{}, err
	}
	return p.run(ctx, opts, p.tcpAttempt(addr, opts.Source, opts.Timeout))
}

// UDP makes opts.Count request/reply exchanges with addr.
func (p *Prober) UDP(ctx context.Context, addr netip.AddrPort, opts Options) (Result, error) {
	opts = opts.withDefaults()
	if err := opts.validate(); err != nil {
		return Result{}, err
	}
	if !opts.ReuseSocket {
		var held heldConns
		defer held.close()
		if !opts.DistinctSources {
			return p.run(ctx, opts, p.udpAttempt(addr, opts.Timeout, opts.Payload, nil))
		}
		return p.run(ctx, opts, p.udpAttempt(addr, opts.Timeout, opts.Payload, &held))
	}
	conn, err := p.dial(ctx, "udp", addr, netip.AddrPort{})
	if err != nil {
		var re *runnerError
		if errors.As(err, &re) {
			return Result{}, err
		}
		rec := newRecorder()
		rec.add(0, nil, err)
		return rec.result(), nil
	}
	defer conn.Close()
	return p.run(ctx, opts, func(context.Context) ([]byte, error) {
		return exchange(conn, opts.Payload, time.Now().Add(opts.Timeout))
	})
}

// run makes opts.Count attempts, opts.Parallel at a time. Attempts cut short
// because ctx ended are not recorded; the partial result and ctx's error are
// returned.
func (p *Prober) run(ctx context.Context, opts Options, once attemptFunc) (Result, error) {
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	rec := newRecorder()
	sem := make(chan struct{}, opts.Parallel)
	var wg sync.WaitGroup
loop:
	for i := range opts.Count {
		select {
		case sem <- struct{}{}:
		case <-ctx.Done():
			break loop
		}
		wg.Go(func() {
			defer func() { <-sem }()
			reply, err := once(ctx)
			var re *runnerError
			switch {
			case errors.As(err, &re):
				cancel(err)
			case ctx.Err() == nil:
				rec.add(i, reply, err)
			}
		})
	}
	wg.Wait()
	if err := context.Cause(ctx); err != nil {
		return rec.result(), err
	}
	return rec.result(), nil
}

// dial connects a socket created inside the namespace. Runner failures are
// returned as *runnerError.
func (p *Prober) dial(ctx context.Context, network string, addr, source netip.AddrPort) (net.Conn, error) {
	var conn net.Conn
	var dialErr error
	err := p.runner.Do(p.ns, func() error {
		var d net.Dialer
		if source.IsValid() {
			d.LocalAddr = net.TCPAddrFromAddrPort(source)
		}
		conn, dialErr = d.DialContext(ctx, network, addr.String())
		return nil
	})
	if err != nil {
		return nil, &runnerError{err: err}
	}
	return conn, dialErr
}

func (p *Prober) tcpAttempt(addr, source netip.AddrPort, timeout time.Duration) attemptFunc {
	return func(ctx context.Context) ([]byte, error) {
		deadline := time.Now().Add(timeout)
		ctx, cancel := context.WithDeadline(ctx, deadline)
		defer cancel()
		conn, err := p.dial(ctx, "tcp", addr, source)
		if err != nil {
			return nil, err
		}
		if source.IsValid() {
			_ = conn.(*net.TCPConn).SetLinger(0)
		}
		defer conn.Close()
		if err := conn.SetDeadline(deadline); err != nil {
			return nil, err
		}
		line, err := bufio.NewReaderSize(conn, 512).ReadSlice('\n')
		if err != nil && len(line) == 0 {
			return nil, err
		}
		return line, nil
	}
}

// udpAttempt makes one exchange from a new socket, closed after it or,
// with hold, when the whole run ends.
func (p *Prober) udpAttempt(addr netip.AddrPort, timeout time.Duration, payload []byte, hold *heldConns) attemptFunc {
	return func(ctx context.Context) ([]byte, error) {
		deadline := time.Now().Add(timeout)
		ctx, cancel := context.WithDeadline(ctx, deadline)
		defer cancel()
		conn, err := p.dial(ctx, "udp", addr, netip.AddrPort{})
		if err != nil {
			return nil, err
		}
		if hold != nil {
			hold.add(conn)
		} else {
			defer conn.Close()
		}
		return exchange(conn, payload, deadline)
	}
}

// heldConns are sockets kept open until a run ends (DistinctSources).
type heldConns struct {
	mu    sync.Mutex
	conns []net.Conn
}

func (h *heldConns) add(c net.Conn) {
	h.mu.Lock()
	h.conns = append(h.conns, c)
	h.mu.Unlock()
}

func (h *heldConns) close() {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, c := range h.conns {
		_ = c.Close()
	}
	h.conns = nil
}

// exchange sends one datagram on a connected UDP socket and reads the reply.
func exchange(conn net.Conn, payload []byte, deadline time.Time) ([]byte, error) {
	if err := conn.SetDeadline(deadline); err != nil {
		return nil, err
	}
	if _, err := conn.Write(payload); err != nil {
		return nil, err
	}
	buf := make([]byte, 64<<10)
	n, err := conn.Read(buf)
	if err != nil {
		return nil, err
	}
	return buf[:n], nil
}
