package canary

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"time"
)

// writeTimeout bounds the write of the token to one connection, so a
// peer that does not read cannot hold the accept loop.
const writeTimeout = time.Second

// acceptRetry is the pause after a failed Accept that is not the close.
const acceptRetry = 100 * time.Millisecond

// listener is the canary's endpoint: it answers every connection with
// the token and closes it.
type listener struct {
	addr netip.AddrPort
	l    net.Listener
	done chan struct{}
}

// listen makes sure the listener is on addr (the node's address and the
// canary port), moving it when the node's address changed.
func (c *Canary) listen(ctx context.Context, addr netip.AddrPort) error {
	if c.ln != nil && c.ln.addr == addr {
		return nil
	}
	c.closeListener()
	l, err := c.cfg.Listen(ctx, "tcp", addr.String())
	if err != nil {
		return fmt.Errorf("canary listener on %s: %w", addr, err)
	}
	ln := &listener{addr: addr, l: l, done: make(chan struct{})}
	go ln.serve(c.token, c.cfg.Clock.After)
	c.ln = ln
	c.cfg.Logger.Info("datapath canary listening", "address", addr)
	return nil
}

// closeListener stops the listener and waits for its goroutine.
func (c *Canary) closeListener() {
	if c.ln == nil {
		return
	}
	_ = c.ln.l.Close()
	<-c.ln.done
	c.ln = nil
}

// serve answers each connection with token until the listener closes.
// The connections are answered one at a time: each is one small write
// under a deadline, and only the prober connects.
func (ln *listener) serve(token []byte, after func(time.Duration) <-chan time.Time) {
	defer close(ln.done)
	for {
		conn, err := ln.l.Accept()
		if errors.Is(err, net.ErrClosed) {
			return
		}
		if err != nil {
			// Out of file descriptors, say: the probe fails meanwhile
			// and says why; try again a little later, as net/http does.
			<-after(acceptRetry)
			continue
		}
		_ = conn.SetWriteDeadline(time.Now().Add(writeTimeout))
		_, _ = conn.Write(token)
		_ = conn.Close()
	}
}
