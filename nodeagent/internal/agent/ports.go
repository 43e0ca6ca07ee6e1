package agent

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"syscall"
	"time"
)

// port is one of the agent's HTTP servers (healthz, metrics) on an address
// it shares with kube-proxy (10256, 10249): served while this agent
// forwards, let go while the node is handed back to kube-proxy (so that
// kube-proxy's health server, which load balancers probe, can bind it),
// and bound again, once free, when the agent takes the node over.
type port struct {
	name, addr string
	h          http.Handler
	log        *slog.Logger
	// first is the listener New bound; nil when the address was in use.
	first net.Listener

	mu    sync.Mutex
	serve bool          // wanted state
	wake  chan struct{} // capacity 1: serve changed
	bound string        // the address served now; "" while not serving
}

func newPort(name, addr string, first net.Listener, h http.Handler, log *slog.Logger) *port {
	return &port{name: name, addr: addr, first: first, h: h, log: log, serve: true, wake: make(chan struct{}, 1)}
}

// Serve asks the port to serve (true) or to let its address go (false).
func (p *port) Serve(on bool) {
	p.mu.Lock()
	p.serve = on
	p.mu.Unlock()
	select {
	case p.wake <- struct{}{}:
	default:
	}
}

func (p *port) wanted() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.serve
}

// Addr is the address served now, "" while not serving.
func (p *port) Addr() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.bound
}

// run serves and lets go as asked until ctx ends.
func (p *port) run(ctx context.Context) error {
	l := p.first
	for {
		if !p.wanted() {
			select {
			case <-ctx.Done():
				return nil
			case <-p.wake:
				continue
			}
		}
		if l == nil {
			var err error
			if l, err = p.bindWhenFree(ctx); err != nil {
				return err
			}
			if l == nil {
				if ctx.Err() != nil {
					return nil
				}
				continue // let go before it was free: wait to be wanted again
			}
		}
		if err := p.serveUntilReleased(ctx, l); err != nil {
			return err
		}
		l = nil
		if ctx.Err() != nil {
			return nil
		}
	}
}

// serveUntilReleased serves l until ctx ends or the port is asked to let
// its address go.
func (p *port) serveUntilReleased(ctx context.Context, l net.Listener) error {
	srv := &http.Server{Handler: p.h, ReadHeaderTimeout: 5 * time.Second}
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(l) }()
	p.mu.Lock()
	p.bound = l.Addr().String()
	p.mu.Unlock()
	defer func() {
		p.mu.Lock()
		p.bound = ""
		p.mu.Unlock()
	}()
	for {
		select {
		case err := <-errc:
			if errors.Is(err, http.ErrServerClosed) {
				return nil
			}
			return fmt.Errorf("%s server: %w", p.name, err)
		case <-ctx.Done():
		case <-p.wake:
			if p.wanted() {
				continue
			}
			p.log.Info("letting the address go: kube-proxy serves it", "server", p.name, "address", p.addr)
		}
		// Not serving from here on: Shutdown closes the listener first,
		// and the address may be another process's before it returns.
		p.mu.Lock()
		p.bound = ""
		p.mu.Unlock()
		// Give connections a moment to finish, then close.
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Second)
		err := srv.Shutdown(sctx)
		cancel()
		if err != nil {
			return errors.Join(err, srv.Close())
		}
		<-errc
		return nil
	}
}

// bindWhenFree binds the address once nothing else holds it, trying every
// second; nil when ctx ends first or the port is no longer wanted.
func (p *port) bindWhenFree(ctx context.Context) (net.Listener, error) {
	t := time.NewTicker(time.Second)
	defer t.Stop()
	logged := false
	for {
		l, err := net.Listen("tcp", p.addr)
		if err == nil {
			if logged {
				p.log.Info("address free again; serving", "server", p.name, "address", p.addr)
			}
			return l, nil
		}
		if !errors.Is(err, syscall.EADDRINUSE) {
			return nil, fmt.Errorf("%s address: %w", p.name, err)
		}
		if !logged {
			p.log.Warn("address in use (kube-proxy still running?); served once it is free", "server", p.name, "address", p.addr)
			logged = true
		}
		select {
		case <-ctx.Done():
			return nil, nil
		case <-p.wake:
			if !p.wanted() {
				return nil, nil
			}
		case <-t.C:
		}
	}
}
