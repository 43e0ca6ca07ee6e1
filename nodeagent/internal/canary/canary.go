package canary

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"sync"
	"time"

	"k8s.io/utils/clock"

	"github.com/switchyard-proxy/switchyard/nodeagent/internal/health"
	"github.com/switchyard-proxy/switchyard/nodeagent/internal/metrics"
	switchyardv1 "github.com/switchyard-proxy/switchyard/proto/switchyard/v1"
)

// The canary Service's name. It lives in Switchyard's own namespace, so
// only a Service the operator creates there to reserve the cluster IP
// can carry it, and the agent's replaces that one in what it applies.
const (
	Namespace   = "switchyard-system"
	ServiceName = "switchyard-datapath-canary"
	Name        = Namespace + "/" + ServiceName
)

// DefaultFailures is how many probes in a row must fail before the
// datapath is unhealthy: one lost SYN is not an outage.
const DefaultFailures = 2

// Config configures a Canary.
type Config struct {
	// VIP is the canary Service's cluster IP and port.
	VIP netip.AddrPort
	// Port is the port the agent answers on, on the node's own address:
	// the canary's endpoint.
	Port uint16
	// Interval is the time between two probes.
	Interval time.Duration
	// Failures is how many probes in a row must fail for the datapath
	// to be unhealthy; DefaultFailures when 0.
	Failures int
	// Armed reports whether probes may run: false until the first
	// successful sync, before which the kernel holds nothing the agent
	// programmed. Always armed when nil.
	Armed func() bool
	// Health and Metrics receive each probe's outcome; optional.
	Health  *health.Tracker
	Metrics *metrics.Metrics
	// Clock times the probes; the real clock when nil.
	Clock  clock.Clock
	Logger *slog.Logger
	// Dial opens the probe's connection and Listen the canary's
	// listener; package net's by default (tests replace them).
	Dial   func(ctx context.Context, network, address string) (net.Conn, error)
	Listen func(ctx context.Context, network, address string) (net.Listener, error)
}

// Canary is the datapath canary: the service it adds to each sync's
// state and the prober that connects to it.
type Canary struct {
	cfg     Config
	token   []byte
	timeout time.Duration

	// Owned by Decorate's caller (the syncer's goroutine).
	collisions map[string]struct{}
	svc        *switchyardv1.ServiceView
	svcFor     endpointKey

	mu  sync.Mutex
	tgt target

	// Owned by Run's goroutine.
	ln        *listener
	failures  int
	healthy   bool
	lastProbe time.Time
	// skipped is the reason the last probe could not run, "" when it ran.
	skipped string
}

// target is where the canary's endpoint is, or why it has none: written
// by Decorate, read by the prober.
type target struct {
	addr   netip.Addr
	reason string
}

// New returns a Canary with a fresh token.
func New(cfg Config) (*Canary, error) {
	if !cfg.VIP.IsValid() || cfg.VIP.Port() == 0 {
		return nil, fmt.Errorf("canary: cluster IP and port %q: want IP:PORT with a port", cfg.VIP)
	}
	if cfg.Port == 0 {
		return nil, errors.New("canary: no listen port")
	}
	if cfg.Interval <= 0 {
		return nil, errors.New("canary: the probe interval must be positive")
	}
	if cfg.Failures <= 0 {
		cfg.Failures = DefaultFailures
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.RealClock{}
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Dial == nil {
		cfg.Dial = (&net.Dialer{}).DialContext
	}
	if cfg.Listen == nil {
		cfg.Listen = (&net.ListenConfig{}).Listen
	}
	raw := make([]byte, 16)
	if _, err := rand.Read(raw); err != nil {
		return nil, fmt.Errorf("canary: token: %w", err)
	}
	c := &Canary{cfg: cfg, token: []byte(hex.EncodeToString(raw)), timeout: min(time.Second, cfg.Interval/2),
		collisions: map[string]struct{}{}, healthy: true}
	c.tgt.reason = "no sync yet"
	cfg.Metrics.DatapathProbeEnabled()
	return c, nil
}

func (c *Canary) setTarget(t target) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.tgt = t
}

func (c *Canary) target() target {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.tgt
}
