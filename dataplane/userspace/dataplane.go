package userspace

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"slices"
	"sync"
	"syscall"
	"time"

	"github.com/switchyard-proxy/switchyard/dataplane"
	"github.com/switchyard-proxy/switchyard/dataplane/internal/sorted"
	"github.com/switchyard-proxy/switchyard/dataplane/serviceport"
)

// Dataplane proxies a node's services in this process. It implements
// dataplane.Dataplane; its methods are safe for concurrent use.
type Dataplane struct {
	cfg  Config
	log  *slog.Logger
	deps *deps
	ctx  context.Context // Config.Context; every proxy's context derives from it

	mu      sync.Mutex // serialises Apply and Cleanup
	proxies map[frontendKey]proxy
	wg      sync.WaitGroup
}

var _ dataplane.Dataplane = (*Dataplane)(nil)

// New returns a Dataplane. It opens nothing until Apply.
func New(cfg Config) (*Dataplane, error) {
	cfg = cfg.withDefaults()
	if err := cfg.validate(); err != nil {
		return nil, fmt.Errorf("userspace: %w", err)
	}
	d := &Dataplane{cfg: cfg, log: cfg.Logger, ctx: cfg.Context, proxies: map[frontendKey]proxy{}}
	d.deps = &deps{cfg: cfg, wg: &d.wg}
	// Proxies close with the context without a watcher goroutine, so
	// that after Cleanup no goroutine of this mode is left.
	context.AfterFunc(cfg.Context, func() {
		d.mu.Lock()
		defer d.mu.Unlock()
		d.closeAllLocked()
	})
	return d, nil
}

// Mode implements dataplane.Dataplane.
func (d *Dataplane) Mode() string { return "userspace" }

// Apply implements dataplane.Dataplane. It reconciles listeners by
// difference: frontends that went away (or lost every backend) are closed
// with their connections; frontends that remain keep their listener and
// get the new backend list, closing only connections to removed backends;
// new frontends are opened. Frontends whose listener failed to open are
// reported in the error (joined) and retried by the next Apply; all the
// others are in place. One whose address and port another socket of the
// node holds (EADDRINUSE) is logged and retried, not an error: that
// socket gets the traffic whatever Apply does. Every Apply also replaces listeners whose serve
// loop died; opts.Full adds nothing, as there is no kernel state to read
// back.
func (d *Dataplane) Apply(ctx context.Context, st *dataplane.State, _ dataplane.ApplyOptions) error {
	if st == nil {
		return errors.New("userspace apply: nil state")
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if err := d.ctx.Err(); err != nil {
		return fmt.Errorf("userspace apply: dataplane stopped: %w", err)
	}
	p := plan(st)
	for _, s := range p.skips {
		d.log.Warn("skipped input", "service", s.Service, "reason", s.Reason)
	}
	// A listener that died is replaced on every Apply, not only full ones:
	// it forwards nothing, so there is nothing to preserve.
	var closed, updated, opened, held int
	for k, px := range d.proxies {
		if _, keep := p.fronts[k]; !keep || px.failed() {
			px.close()
			delete(d.proxies, k)
			closed++
			d.log.Debug("listener closed", "frontend", k.String())
		}
	}
	var errs []error
	for _, k := range sorted.KeysFunc(p.fronts, frontendKey.compare) {
		f := p.fronts[k]
		if px, ok := d.proxies[k]; ok {
			px.update(f)
			updated++
			continue
		}
		if err := ctx.Err(); err != nil {
			errs = append(errs, err)
			break
		}
		px, err := d.open(ctx, f)
		if errors.Is(err, syscall.EADDRINUSE) {
			// Another socket of the node holds the address and port (a
			// host-network server on 0.0.0.0 and the service's port, such
			// as Switchyard's own control plane): it receives the traffic
			// whatever this mode does, and a NACK on every sync would only
			// hide real failures. Reported, retried by the next Apply.
			held++
			d.log.Warn("frontend not proxied: its address and port are held by another socket on the node",
				"frontend", k.String(), "service", f.label, "err", err)
			continue
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("%s %s of %s: %w", f.kind, k, f.label, err))
			continue
		}
		d.proxies[k] = px
		opened++
	}
	d.log.Info("userspace sync", "listeners", len(d.proxies), "opened", opened, "closed", closed,
		"updated", updated, "failed", len(errs), "held", held, "withoutEndpoints", len(p.empty), "skipped", len(p.skips))
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("userspace apply: %w", err)
	}
	return nil
}

// open binds a frontend's socket (see Bind) and starts its proxy.
func (d *Dataplane) open(ctx context.Context, f frontend) (proxy, error) {
	addr, freebind := f.key.addr, !d.cfg.NoFreebind
	// Node ports are served on the node's own (or every) address, which
	// the node can always bind: never redirected.
	if d.cfg.Bind == BindLocalPort && f.kind != KindNodePort {
		la, ok := d.cfg.localFor(addr.Addr())
		if !ok {
			return nil, fmt.Errorf("no local address of this family (LocalAddress %v)", d.cfg.LocalAddress)
		}
		addr, freebind = netip.AddrPortFrom(la, 0), false
	}
	if f.kind == KindNodePort {
		freebind = false
	}
	px, err := d.listen(ctx, f, addr, freebind)
	if err != nil && isAddrNotAvail(err) && addr == f.key.addr {
		if la, ok := d.cfg.localFor(addr.Addr()); ok {
			d.log.Warn("service address not bindable here; falling back to a local port", "frontend", f.key.String(), "err", err)
			px, err = d.listen(ctx, f, netip.AddrPortFrom(la, 0), false)
		}
	}
	if err != nil {
		return nil, err
	}
	l := px.info()
	attrs := []any{"frontend", f.key.String(), "bound", l.Bound.String(), "service", f.label,
		"kind", string(f.kind), "backends", len(f.backends)}
	if rules := l.RedirectRules(); len(rules) > 0 {
		// The operator (or whatever holds netfilter rights) needs these.
		d.log.Info("listener on a local port; steer the service address to it", append(attrs, "redirect", rules)...)
	} else {
		d.log.Debug("listener opened", attrs...)
	}
	return px, nil
}

func (d *Dataplane) listen(ctx context.Context, f frontend, addr netip.AddrPort, freebind bool) (proxy, error) {
	switch f.key.proto {
	case dataplane.TCP:
		ln, err := d.cfg.Sockets.ListenTCP(ctx, addr, freebind)
		if err != nil {
			return nil, fmt.Errorf("listen tcp %s: %w", addr, err)
		}
		return newTCPProxy(d.ctx, d.deps, f, ln), nil
	case dataplane.UDP:
		pc, err := d.cfg.Sockets.ListenUDP(ctx, addr, freebind)
		if err != nil {
			return nil, fmt.Errorf("listen udp %s: %w", addr, err)
		}
		return newUDPProxy(d.ctx, d.deps, f, pc), nil
	}
	return nil, fmt.Errorf("protocol %q", f.key.proto)
}

// Cleanup implements dataplane.Dataplane: it closes every listener and
// proxied connection, then waits until every goroutine of the mode has
// returned or ctx ends. Apply may be called again afterwards.
func (d *Dataplane) Cleanup(ctx context.Context) error {
	// Held through the wait: an Apply starting proxies while the wait
	// group drains would race with Wait.
	d.mu.Lock()
	defer d.mu.Unlock()
	d.closeAllLocked()
	done := make(chan struct{})
	go func() {
		d.wg.Wait()
		close(done)
	}()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("userspace cleanup: waiting for proxy goroutines: %w", ctx.Err())
	}
}

func (d *Dataplane) closeAllLocked() {
	for k, px := range d.proxies {
		px.close()
		delete(d.proxies, k)
	}
}

// Listener describes one open frontend.
type Listener struct {
	Service  string // "namespace/name"
	Port     string // service port name
	Kind     Kind
	Protocol dataplane.Protocol
	// Frontend is the address clients connect to.
	Frontend netip.AddrPort
	// Bound is where the socket listens: Frontend, or a local port that
	// RedirectRules steer Frontend to.
	Bound    netip.AddrPort
	Backends []netip.AddrPort
	// Algorithm is maglev or source-hash when Table picks the backend
	// (its slots index Backends); else round robin.
	Algorithm serviceport.Algorithm
	Table     *serviceport.Table
	// Affinity is the ClientIP affinity timeout; 0 without affinity.
	Affinity time.Duration
	// Active counts open TCP connections or UDP sessions.
	Active int
}

// Listeners returns the open frontends, sorted by protocol and address.
func (d *Dataplane) Listeners() []Listener {
	d.mu.Lock()
	defer d.mu.Unlock()
	out := make([]Listener, 0, len(d.proxies))
	for _, px := range d.proxies {
		out = append(out, px.info())
	}
	slices.SortFunc(out, func(a, b Listener) int {
		return cmp.Or(cmp.Compare(a.Protocol, b.Protocol), a.Frontend.Compare(b.Frontend))
	})
	return out
}

// RedirectRules returns the netfilter rules (iptables or ip6tables
// arguments) that steer Frontend to a local-port listener, for traffic
// arriving from outside (PREROUTING) and from the node itself (OUTPUT);
// nil when the listener is bound to the frontend address itself. This
// mode never installs them.
func (l Listener) RedirectRules() []string {
	if l.Bound == l.Frontend {
		return nil
	}
	match := fmt.Sprintf("-p %s -d %s --dport %d", l.Protocol, l.Frontend.Addr(), l.Frontend.Port())
	target := fmt.Sprintf("-j REDIRECT --to-ports %d", l.Bound.Port())
	if !l.Bound.Addr().IsUnspecified() {
		// REDIRECT goes to the incoming interface's primary address; a
		// listener on one address needs a DNAT to it.
		target = "-j DNAT --to-destination " + l.Bound.String()
	}
	return []string{
		"-t nat -A PREROUTING " + match + " " + target,
		"-t nat -A OUTPUT " + match + " " + target,
	}
}
