package userspace

import (
	"context"
	"log/slog"
	"net/netip"
	"slices"
	"sync"
	"time"
)

// proxy serves one frontend. Implementations: tcpProxy, udpProxy.
type proxy interface {
	// update swaps the frontend's backends (and affinity) in place: the
	// listener stays, established connections to backends that remain
	// stay, connections to removed backends are closed.
	update(f frontend)
	// close closes the listener and every proxied connection. The
	// proxy's goroutines end soon after (Dataplane.wg).
	close()
	// failed reports whether the serve loop ended on its own (an accept
	// or read error), so the next Apply replaces the proxy.
	failed() bool
	// info describes the proxy for Dataplane.Listeners.
	info() Listener
}

// proxyBase is what TCP and UDP proxies share: identity, balancer,
// lifetime and the connection set.
type proxyBase struct {
	deps  *deps
	bound netip.AddrPort
	bal   *balancer
	ctx   context.Context // canceled by close
	stop  context.CancelFunc
	log   *slog.Logger

	mu     sync.Mutex
	front  frontend
	closed bool
	dead   bool // serve loop ended by itself
}

// deps are the Dataplane's parts a proxy uses.
type deps struct {
	cfg Config
	wg  *sync.WaitGroup
}

func newBase(parent context.Context, d *deps, f frontend, bound netip.AddrPort, log *slog.Logger) proxyBase {
	ctx, stop := context.WithCancel(parent)
	return proxyBase{
		deps: d, bound: bound, bal: newBalancer(d.cfg.Now, f.backends, f.affinity, f.hash),
		ctx: ctx, stop: stop, front: f,
		log: log.With("frontend", f.key.String(), "service", f.label, "kind", string(f.kind)),
	}
}

// allowedLocked reports whether ep is still a backend of an open proxy;
// the caller holds mu.
func (p *proxyBase) allowedLocked(ep netip.AddrPort) bool {
	return !p.closed && slices.Contains(p.front.backends, ep)
}

func (p *proxyBase) failed() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.dead
}

func (p *proxyBase) listener(active int) Listener {
	f := p.front
	return Listener{
		Service: f.service, Port: f.port, Kind: f.kind, Protocol: f.key.proto,
		Frontend: f.key.addr, Bound: p.bound, Backends: slices.Clone(f.backends), Affinity: f.affinity, Active: active,
		Algorithm: f.hash.alg, Table: f.hash.table,
	}
}

// acceptBackoff bounds the pause after a temporary accept or read error
// (EMFILE, ENOBUFS): the loop must not spin, and must not give up.
const (
	minBackoff = 5 * time.Millisecond
	maxBackoff = time.Second
)

// keepServing is the serve loops' answer to an accept or read (op)
// that failed with err: whether to go on. A transient error is logged at
// level and retried after a pause of *backoff, which doubles up to
// maxBackoff while errors follow one another (the loop resets it on
// success). Any other error ends the loop and marks the proxy dead, so
// the next Apply replaces it. A closing proxy, whose close made the call
// fail, ends without a word.
func (p *proxyBase) keepServing(op string, err error, transient bool, level slog.Level, backoff *time.Duration) bool {
	if p.ctx.Err() != nil {
		return false
	}
	if !transient {
		p.log.Error(op+" failed; the listener is replaced on the next sync", "err", err)
		p.mu.Lock()
		p.dead = true
		p.mu.Unlock()
		return false
	}
	p.log.Log(p.ctx, level, op+" failed, retrying", "err", err, "backoff", *backoff)
	if !pause(p.ctx, *backoff) {
		return false
	}
	*backoff = min(2**backoff, maxBackoff)
	return true
}

// pause waits d or until ctx ends; it reports whether to go on.
func pause(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}

// temporary reports errors a serve loop survives: out of descriptors or
// buffers, a connection aborted before accept.
func temporary(err error) bool { return isResourceErr(err) }
