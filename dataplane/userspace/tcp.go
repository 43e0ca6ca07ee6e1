package userspace

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/netip"
)

// tcpProxy accepts on one frontend and relays each connection to a
// backend, trying the next backend when one fails to connect.
type tcpProxy struct {
	proxyBase
	ln    *net.TCPListener
	conns map[*tcpConn]struct{} // guarded by mu
}

// tcpConn is one proxied connection.
type tcpConn struct {
	client, backend *net.TCPConn
	ep              netip.AddrPort
}

func (c *tcpConn) close() {
	c.client.Close()
	c.backend.Close()
}

func newTCPProxy(parent context.Context, d *deps, f frontend, ln *net.TCPListener) *tcpProxy {
	bound := ln.Addr().(*net.TCPAddr).AddrPort()
	p := &tcpProxy{ln: ln, conns: map[*tcpConn]struct{}{}}
	p.proxyBase = newBase(parent, d, f, unmapPort(bound), d.cfg.Logger)
	d.wg.Go(p.serve)
	return p
}

func (p *tcpProxy) serve() {
	backoff := minBackoff
	for {
		c, err := p.ln.AcceptTCP()
		if err != nil {
			if p.keepServing("accept", err, temporary(err), slog.LevelWarn, &backoff) {
				continue
			}
			return
		}
		backoff = minBackoff
		p.deps.wg.Go(func() { p.handle(c) })
	}
}

// handle connects c to a backend, retrying the others in rotation order,
// and relays. With no backend reachable the client gets a reset.
func (p *tcpProxy) handle(c *net.TCPConn) {
	clientPort := unmapPort(c.RemoteAddr().(*net.TCPAddr).AddrPort())
	client := clientPort.Addr()
	var tc *tcpConn
	order := p.bal.pick(clientPort)
	for i, ep := range order {
		if p.ctx.Err() != nil {
			break
		}
		ctx, cancel := context.WithTimeout(p.ctx, p.deps.cfg.DialTimeout)
		b, err := p.deps.cfg.Sockets.DialTCP(ctx, ep)
		cancel()
		if err != nil {
			p.bal.failed(client, ep)
			p.log.Debug("backend failed", "backend", ep.String(), "client", client.String(),
				"err", err, "next", i+1 < len(order))
			continue
		}
		cand := &tcpConn{client: c, backend: b, ep: ep}
		if p.track(cand) {
			tc = cand
			break
		}
		// Removed by an update while we dialed: the next one may remain.
		b.Close()
	}
	if tc == nil {
		// RST rather than FIN: the client must not mistake a proxy
		// without a working backend for an empty answer.
		_ = c.SetLinger(0)
		c.Close()
		return
	}
	p.bal.used(client, tc.ep)
	defer p.untrack(tc)
	relay(p.deps, tc)
}

// track registers tc unless the proxy closed or ep was removed while
// dialing, so an update never misses a connection it must close.
func (p *tcpProxy) track(tc *tcpConn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.allowedLocked(tc.ep) {
		return false
	}
	p.conns[tc] = struct{}{}
	return true
}

func (p *tcpProxy) untrack(tc *tcpConn) {
	p.mu.Lock()
	delete(p.conns, tc)
	p.mu.Unlock()
	tc.close()
}

// relay copies both ways until both directions ended. A clean EOF is
// passed on as a half-close (CloseWrite), so request/response protocols
// that shut down their sending side keep working; an error on either side
// tears down both. io.Copy between two *net.TCPConn splices on Linux.
func relay(d *deps, tc *tcpConn) {
	done := make(chan struct{})
	d.wg.Go(func() {
		defer close(done)
		copyHalf(tc.backend, tc.client, tc)
	})
	copyHalf(tc.client, tc.backend, tc)
	<-done
}

func copyHalf(dst, src *net.TCPConn, tc *tcpConn) {
	if _, err := io.Copy(dst, src); err != nil {
		tc.close()
		return
	}
	if err := dst.CloseWrite(); err != nil && !errors.Is(err, net.ErrClosed) {
		tc.close()
	}
}

func (p *tcpProxy) update(f frontend) {
	// Both under mu, so track never sees one list and the balancer the
	// other (lock order: mu, then the balancer's).
	p.mu.Lock()
	defer p.mu.Unlock()
	p.bal.update(f.backends, f.affinity, f.hash)
	p.front = f
	for tc := range p.conns {
		if !p.allowedLocked(tc.ep) {
			tc.close()
		}
	}
}

func (p *tcpProxy) close() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return
	}
	p.closed = true
	p.stop()
	p.ln.Close()
	for tc := range p.conns {
		tc.close()
	}
}

func (p *tcpProxy) info() Listener {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.listener(len(p.conns))
}

func unmapPort(ap netip.AddrPort) netip.AddrPort {
	return netip.AddrPortFrom(ap.Addr().Unmap(), ap.Port())
}
