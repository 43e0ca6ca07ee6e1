package userspace

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"net/netip"
	"os"
	"sync"
	"time"
)

// udpProxy relays datagrams of one frontend. Each client address gets a
// session: a socket connected to one backend, whose replies are sent back
// to the client from the frontend socket. A session ends after
// UDPIdleTimeout without traffic either way, when its backend is removed,
// or when every backend refused it.
type udpProxy struct {
	proxyBase
	pc       *net.UDPConn
	sessions map[netip.AddrPort]*udpSession // guarded by mu
}

// udpSession is one client's flow to one backend.
type udpSession struct {
	client netip.AddrPort

	mu     sync.Mutex
	order  []netip.AddrPort // backends in try order; ep is order[idx]
	idx    int
	ep     netip.AddrPort
	conn   *net.UDPConn
	last   []byte // the client's latest datagram, resent after a refusal
	active time.Time
	ended  bool
}

func newUDPProxy(parent context.Context, d *deps, f frontend, pc *net.UDPConn) *udpProxy {
	bound := pc.LocalAddr().(*net.UDPAddr).AddrPort()
	p := &udpProxy{pc: pc, sessions: map[netip.AddrPort]*udpSession{}}
	p.proxyBase = newBase(parent, d, f, unmapPort(bound), d.cfg.Logger)
	d.wg.Go(p.serve)
	return p
}

func (p *udpProxy) serve() {
	buf := make([]byte, DefaultUDPBufferSize)
	backoff := minBackoff
	for {
		n, from, err := p.pc.ReadFromUDPAddrPort(buf)
		if err != nil {
			// Refusals are routine for UDP: no louder than Debug.
			if p.keepServing("read", err, temporary(err) || isRefused(err), slog.LevelDebug, &backoff) {
				continue
			}
			return
		}
		backoff = minBackoff
		p.forward(unmapPort(from), buf[:n])
	}
}

// forward sends one client datagram through its session, opening one
// when the client is new.
func (p *udpProxy) forward(client netip.AddrPort, b []byte) {
	p.mu.Lock()
	s, ok := p.sessions[client]
	if !ok {
		if p.closed || len(p.sessions) >= p.deps.cfg.MaxUDPSessions {
			p.mu.Unlock()
			p.log.Debug("datagram dropped: no session available", "client", client.String())
			return
		}
		s = &udpSession{client: client}
		p.sessions[client] = s
	}
	p.mu.Unlock()
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ended {
		return // ended between lookup and lock; the client's next datagram opens a new one
	}
	s.last = append(s.last[:0], b...)
	s.active = time.Now()
	if s.conn == nil {
		s.order = p.bal.pick(client)
		if !p.connectLocked(s, 0) {
			p.endLocked(s)
			return
		}
		p.deps.wg.Go(func() { p.replies(s) })
		return // connectLocked sent s.last
	}
	if _, err := s.conn.Write(b); err != nil {
		p.log.Debug("send to backend failed", "backend", s.ep.String(), "err", err)
	}
}

// connectLocked connects s to the first backend from order[from] that
// accepts a socket and sends the client's latest datagram to it. A refusal
// (ICMP port unreachable) only shows on a later read, where replies()
// moves on to the next backend.
func (p *udpProxy) connectLocked(s *udpSession, from int) bool {
	for i := from; i < len(s.order); i++ {
		ep := s.order[i]
		p.mu.Lock()
		ok := p.allowedLocked(ep)
		p.mu.Unlock()
		if !ok {
			continue
		}
		ctx, cancel := context.WithTimeout(p.ctx, p.deps.cfg.DialTimeout)
		c, err := p.deps.cfg.Sockets.DialUDP(ctx, ep)
		cancel()
		if err != nil {
			p.bal.failed(s.client.Addr(), ep)
			p.log.Debug("backend failed", "backend", ep.String(), "client", s.client.String(), "err", err)
			continue
		}
		if s.conn != nil {
			s.conn.Close()
		}
		s.conn, s.ep, s.idx = c, ep, i
		p.bal.used(s.client.Addr(), ep)
		if _, err := c.Write(s.last); err != nil {
			p.log.Debug("send to backend failed", "backend", ep.String(), "err", err)
		}
		return true
	}
	return false
}

// replies relays the backend's datagrams to the client until the session
// is idle for UDPIdleTimeout, its socket is closed, or every backend
// refused.
func (p *udpProxy) replies(s *udpSession) {
	buf := make([]byte, DefaultUDPBufferSize)
	idle := p.deps.cfg.UDPIdleTimeout
	for {
		s.mu.Lock()
		conn, active, ended := s.conn, s.active, s.ended
		s.mu.Unlock()
		if ended {
			return
		}
		if err := conn.SetReadDeadline(active.Add(idle)); err != nil {
			p.end(s)
			return
		}
		n, err := conn.Read(buf)
		switch {
		case err == nil:
			s.mu.Lock()
			s.active = time.Now()
			s.mu.Unlock()
			if _, werr := p.pc.WriteToUDPAddrPort(buf[:n], s.client); werr != nil {
				p.log.Debug("reply to client failed", "client", s.client.String(), "err", werr)
			}
		case errors.Is(err, os.ErrDeadlineExceeded):
			s.mu.Lock()
			expired := !s.active.Add(idle).After(time.Now())
			s.mu.Unlock()
			if expired {
				p.end(s)
				return
			}
		case isRefused(err):
			if !p.retry(s, conn) {
				return
			}
		default: // closed by end, update or close
			p.end(s)
			return
		}
	}
}

// retry moves s to the next backend after conn's backend refused.
func (p *udpProxy) retry(s *udpSession, conn *net.UDPConn) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ended || s.conn != conn {
		return !s.ended
	}
	p.bal.failed(s.client.Addr(), s.ep)
	p.log.Debug("backend refused", "backend", s.ep.String(), "client", s.client.String(), "next", s.idx+1 < len(s.order))
	if p.connectLocked(s, s.idx+1) {
		return true
	}
	p.endLocked(s)
	return false
}

func (p *udpProxy) end(s *udpSession) {
	s.mu.Lock()
	defer s.mu.Unlock()
	p.endLocked(s)
}

// endLocked closes s and forgets it; the caller holds s.mu.
func (p *udpProxy) endLocked(s *udpSession) {
	if s.ended {
		return
	}
	s.ended = true
	if s.conn != nil {
		s.conn.Close()
	}
	p.mu.Lock()
	if p.sessions[s.client] == s {
		delete(p.sessions, s.client)
	}
	p.mu.Unlock()
}

func (p *udpProxy) update(f frontend) {
	p.mu.Lock()
	p.bal.update(f.backends, f.affinity, f.hash)
	p.front = f
	var gone []*udpSession
	for _, s := range p.sessions {
		gone = append(gone, s)
	}
	p.mu.Unlock()
	for _, s := range gone {
		s.mu.Lock()
		p.mu.Lock()
		keep := s.conn == nil || p.allowedLocked(s.ep)
		p.mu.Unlock()
		if !keep {
			p.endLocked(s)
		}
		s.mu.Unlock()
	}
}

func (p *udpProxy) close() {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return
	}
	p.closed = true
	p.stop()
	p.pc.Close()
	var all []*udpSession
	for _, s := range p.sessions {
		all = append(all, s)
	}
	p.mu.Unlock()
	for _, s := range all {
		p.end(s)
	}
}

func (p *udpProxy) info() Listener {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.listener(len(p.sessions))
}
