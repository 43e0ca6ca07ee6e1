package netns

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"time"
)

// Relay makes a host-namespace TCP address reachable from inside a
// namespace: it listens inside the namespace and, for every connection,
// dials the target from the host namespace and copies bytes both ways.
// The test bed's kube-apiserver listens on the host's loopback, which a
// namespace cannot see; listening on the same address inside the
// namespace lets a process there (upstream kube-proxy) use the bed's
// kubeconfig unchanged, whose serving certificate names 127.0.0.1.
// Nothing is configured in the host namespace.
type Relay struct {
	l      net.Listener
	target string
	log    *slog.Logger

	mu    sync.Mutex
	conns map[net.Conn]struct{}
	wg    sync.WaitGroup
}

// Relay listens on listen inside ns and relays to target, dialled from
// the host namespace. Close stops it.
func (t *Topology) Relay(ns, listen, target string, log *slog.Logger) (*Relay, error) {
	r := &Relay{target: target, log: log, conns: map[net.Conn]struct{}{}}
	err := t.Do(ns, func() error {
		var err error
		r.l, err = net.Listen("tcp", listen)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("relay listen %s in %s: %w", listen, ns, err)
	}
	r.wg.Go(r.accept)
	return r, nil
}

func (r *Relay) accept() {
	for {
		c, err := r.l.Accept()
		if err != nil {
			return // listener closed
		}
		r.wg.Go(func() { r.pipe(c) })
	}
}

// track adds or removes an open connection; false once the relay closed.
func (r *Relay) track(c net.Conn, add bool) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if add {
		if r.conns == nil {
			return false
		}
		r.conns[c] = struct{}{}
	} else if r.conns != nil {
		delete(r.conns, c)
	}
	return true
}

// pipe runs on an unlocked goroutine, so its dial leaves from the host
// namespace.
func (r *Relay) pipe(in net.Conn) {
	defer in.Close()
	out, err := net.DialTimeout("tcp", r.target, 5*time.Second)
	if err != nil {
		r.log.Warn("relay dial", "target", r.target, "err", err)
		return
	}
	defer out.Close()
	if !r.track(in, true) || !r.track(out, true) {
		return
	}
	defer r.track(in, false)
	defer r.track(out, false)
	done := make(chan struct{}, 2)
	cp := func(dst, src net.Conn) {
		_, _ = io.Copy(dst, src)
		done <- struct{}{}
	}
	go cp(out, in)
	go cp(in, out)
	<-done
	// One direction ended: close both so the other copy returns.
	in.Close()
	out.Close()
	<-done
}

// Close stops accepting, closes every open connection and waits.
// Idempotent.
func (r *Relay) Close() {
	_ = r.l.Close()
	r.mu.Lock()
	for c := range r.conns {
		c.Close()
	}
	r.conns = nil
	r.mu.Unlock()
	r.wg.Wait()
}

// HTTPClient returns an HTTP client whose connections are opened inside
// ns (what a node serves on its loopback: metrics, health), each request
// on a new connection, timing out after timeout.
func (t *Topology) HTTPClient(ns string, timeout time.Duration) *http.Client {
	dial := func(ctx context.Context, network, addr string) (net.Conn, error) {
		var c net.Conn
		err := t.Do(ns, func() error {
			var err error
			c, err = (&net.Dialer{Timeout: timeout}).DialContext(ctx, network, addr)
			return err
		})
		return c, err
	}
	return &http.Client{Timeout: timeout, Transport: &http.Transport{DialContext: dial, DisableKeepAlives: true}}
}
