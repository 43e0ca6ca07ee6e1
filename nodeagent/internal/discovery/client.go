package discovery

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"slices"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"
	"k8s.io/utils/clock"

	"github.com/switchyard-proxy/switchyard/nodeagent/internal/view"
	switchyardv1 "github.com/switchyard-proxy/switchyard/proto/switchyard/v1"
)

// Applier applies complete batches. The syncer implements it.
type Applier interface {
	// Versions returns the versions of the applied resources by name.
	Versions() map[string]string
	// Apply programs the current view with u applied and returns once the
	// kernel change returned. On error the previous state is kept.
	Apply(ctx context.Context, u *view.Update) (view.Applied, error)
}

// Observer is told about stream events, e.g. for metrics. Optional.
type Observer interface {
	// Connected reports that a stream to addr opened (up) or ended.
	Connected(addr string, up bool)
	// Nacked reports a NACK sent.
	Nacked()
}

// Backoff bounds the wait between reconnects.
type Backoff struct {
	// Initial is the first wait; the wait doubles per failed attempt.
	Initial time.Duration
	// Max caps the wait.
	Max time.Duration
}

// Config configures a Client.
type Config struct {
	// Addresses are the configured control-plane addresses, tried in turn
	// after the learnt ones.
	Addresses []string
	// Learnt are control-plane addresses learnt from an earlier
	// NodeConfig (persisted by the caller): they are dialled first.
	Learnt []string
	// Node identifies the agent on every stream.
	Node *switchyardv1.Node
	// DialOptions carry the transport credentials.
	DialOptions []grpc.DialOption
	// LearntDialOptions replace DialOptions when dialling a learnt address
	// that is not also configured: e.g. TLS credentials whose ServerName
	// is a name the control plane's certificate carries, since a learnt
	// address is an IP. Nil means DialOptions.
	LearntDialOptions []grpc.DialOption
	// OnLearnt is called from Run's goroutine with each new list of
	// control-plane addresses an applied NodeConfig carries (to persist
	// it); optional. The stream is kept: the list is dialled from the next
	// reconnect on.
	OnLearnt func(addrs []string)
	Backoff  Backoff
	Applier  Applier
	Logger   *slog.Logger
	// Clock times the backoff; the real clock when nil.
	Clock clock.Clock
	// Rand returns a number in [0, 1) for jitter; math/rand/v2 when nil.
	Rand func() float64
	// Observer is optional.
	Observer Observer
	// CurrentMode, when set, gives the mode sent in Node.mode on each new
	// stream (the mode the agent programs right now); optional.
	CurrentMode func() switchyardv1.DataplaneMode
	// CurrentSettingsHash, when set, gives the NodeConfig settings hash
	// the agent programs right now, sent in Node.settings_hash on each new
	// stream and in every ACK report; optional.
	CurrentSettingsHash func() string
	// CurrentDrift, when set, gives the drift checks' status each ACK
	// report carries (ApplyReport.drift).
	CurrentDrift func() *switchyardv1.DriftStatus
	// CurrentDatapath, when set, gives the datapath probe's verdict each
	// report carries (ApplyReport.datapath); nil while there is none.
	CurrentDatapath func() *switchyardv1.DatapathStatus
	// Refresh, when set, asks for a report refresh: the client sends the
	// current report again with the nonce of the last batch it
	// acknowledged, so the control plane sees a changed datapath verdict
	// or a drift repair without waiting for the next view.
	Refresh <-chan struct{}
	// Reconnect, when set, asks for a new stream to the same address: the
	// open stream is closed and the address dialled again after the
	// shortest backoff, so that a new TLS handshake presents a rotated
	// client certificate (tlscreds.Source). It is received only while a
	// stream is open.
	Reconnect <-chan struct{}
}

// errReconnect ends a stream that Config.Reconnect asked to replace.
var errReconnect = errors.New("reconnect asked")

// Client holds one DeltaSnapshots stream at a time.
type Client struct {
	cfg     Config
	targets *targets
}

// New checks cfg and returns a Client.
func New(cfg Config) (*Client, error) {
	if len(cfg.Addresses) == 0 {
		return nil, errors.New("discovery client: no control-plane address")
	}
	if cfg.Node.GetName() == "" {
		return nil, errors.New("discovery client: empty node name")
	}
	if cfg.Applier == nil {
		return nil, errors.New("discovery client: no applier")
	}
	if cfg.Backoff.Initial <= 0 {
		cfg.Backoff.Initial = 500 * time.Millisecond
	}
	if cfg.Backoff.Max < cfg.Backoff.Initial {
		cfg.Backoff.Max = max(30*time.Second, cfg.Backoff.Initial)
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.RealClock{}
	}
	if cfg.Rand == nil {
		cfg.Rand = rand.Float64
	}
	return &Client{cfg: cfg, targets: newTargets(cfg.Node.GetName(), cfg.Addresses, cfg.Learnt)}, nil
}

// Targets returns the addresses the client dials, in order: the learnt
// ones (rotated by a hash of the node's name, so that agents spread over
// the replicas), then the configured ones not among them.
func (c *Client) Targets() []string { return c.targets.addrs() }

// Run holds a stream until ctx is done, reconnecting and failing over as
// needed. It returns nil when ctx is canceled: the stream is closed and the
// applied rules stay in place.
func (c *Client) Run(ctx context.Context) error {
	attempt := 0
	var (
		t        target
		again    bool // dial t again: a reconnect was asked
		received bool // the last stream worked: start the list over
	)
	for {
		switch {
		case again:
		case received:
			t = c.targets.restart(t.addr)
		default:
			t = c.targets.next(t.addr)
		}
		var err error
		received, err = c.runStream(ctx, t)
		if ctx.Err() != nil {
			return nil
		}
		again = errors.Is(err, errReconnect)
		if received || again {
			attempt = 0
		}
		wait := c.backoff(attempt)
		attempt++
		c.cfg.Logger.Info("control-plane stream ended", "address", t.addr, "err", err, "retryIn", wait)
		if !c.sleep(ctx, wait) {
			return nil
		}
	}
}

// backoff returns the wait before the reconnect after attempt failures: the
// capped exponential in [d/2, d).
func (c *Client) backoff(attempt int) time.Duration {
	d := c.cfg.Backoff.Initial
	for range attempt {
		d *= 2
		if d >= c.cfg.Backoff.Max {
			d = c.cfg.Backoff.Max
			break
		}
	}
	return d/2 + time.Duration(c.cfg.Rand()*float64(d/2))
}

func (c *Client) sleep(ctx context.Context, d time.Duration) bool {
	t := c.cfg.Clock.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C():
		return true
	}
}

// runStream holds one stream to t. received reports whether any response
// arrived.
func (c *Client) runStream(ctx context.Context, t target) (received bool, err error) {
	addr, opts := t.addr, c.cfg.DialOptions
	if t.learnt && c.cfg.LearntDialOptions != nil {
		opts = c.cfg.LearntDialOptions
	}
	conn, err := grpc.NewClient(addr, opts...)
	if err != nil {
		return false, fmt.Errorf("dial %s: %w", addr, err)
	}
	defer conn.Close()
	sctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	defer func() {
		// However the stream noticed (a receive, a send, an ACK whose
		// apply outlived it), an end asked for is a reconnect.
		if err != nil && errors.Is(context.Cause(sctx), errReconnect) {
			err = fmt.Errorf("%w: %w", errReconnect, err)
		}
	}()
	stream, err := switchyardv1.NewDiscoveryServiceClient(conn).DeltaSnapshots(sctx)
	if err != nil {
		return false, fmt.Errorf("open stream to %s: %w", addr, err)
	}
	node := proto.CloneOf(c.cfg.Node)
	if c.cfg.CurrentMode != nil {
		node.Mode = c.cfg.CurrentMode()
	}
	if c.cfg.CurrentSettingsHash != nil {
		node.SettingsHash = c.cfg.CurrentSettingsHash()
	}
	first := &switchyardv1.DeltaSnapshotsRequest{
		Node:                    node,
		InitialResourceVersions: c.cfg.Applier.Versions(),
	}
	if err := stream.Send(first); err != nil {
		return false, fmt.Errorf("send to %s: %w", addr, recvErr(stream, err))
	}
	if c.cfg.Observer != nil {
		c.cfg.Observer.Connected(addr, true)
		defer c.cfg.Observer.Connected(addr, false)
	}
	c.cfg.Logger.Info("control-plane stream open", "address", addr, "learnt", t.learnt, "initialResources", len(first.InitialResourceVersions))
	out := &reporter{stream: stream}
	go c.refresh(sctx, out)
	go c.awaitReconnect(sctx, cancel)
	var b batch
	for {
		resp, err := stream.Recv()
		if err != nil {
			return received, fmt.Errorf("receive from %s: %w", addr, err)
		}
		received = true
		req := c.handle(ctx, &b, resp)
		if ctx.Err() != nil {
			return received, ctx.Err()
		}
		if err := out.send(req); err != nil {
			return received, fmt.Errorf("send to %s: %w", addr, recvErr(stream, err))
		}
	}
}

// awaitReconnect ends the stream (cancel with errReconnect) when a
// reconnect is asked, until ctx ends.
func (c *Client) awaitReconnect(ctx context.Context, cancel context.CancelCauseFunc) {
	if c.cfg.Reconnect == nil {
		return
	}
	select {
	case <-ctx.Done():
	case <-c.cfg.Reconnect:
		c.cfg.Logger.Info("closing the control-plane stream to open a new one")
		cancel(errReconnect)
	}
}

// reporter serializes the stream's sends (gRPC allows one sender at a
// time) and remembers the nonce of the last complete batch acknowledged.
type reporter struct {
	stream  grpc.BidiStreamingClient[switchyardv1.DeltaSnapshotsRequest, switchyardv1.DeltaSnapshotsResponse]
	mu      sync.Mutex
	applied string
}

func (r *reporter) send(req *switchyardv1.DeltaSnapshotsRequest) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if req.GetAppliedVersion() != "" {
		r.applied = req.GetResponseNonce()
	}
	return r.stream.Send(req)
}

// refresh sends a report refresh on every Refresh signal until ctx ends.
// One that races a new response is stale to the server and ignored; that
// response's ACK carries the report anyway.
func (c *Client) refresh(ctx context.Context, r *reporter) {
	if c.cfg.Refresh == nil {
		return
	}
	for {
		select {
		case <-ctx.Done():
			return
		case <-c.cfg.Refresh:
		}
		r.mu.Lock()
		nonce := r.applied
		r.mu.Unlock()
		if nonce == "" {
			continue // nothing acknowledged yet: the first ACK reports it
		}
		mode := switchyardv1.DataplaneMode_DATAPLANE_MODE_UNSPECIFIED
		if c.cfg.CurrentMode != nil {
			mode = c.cfg.CurrentMode()
		}
		req := &switchyardv1.DeltaSnapshotsRequest{ResponseNonce: nonce, Report: c.report(mode)}
		if err := r.send(req); err != nil {
			return // the stream is failing; Recv reports it
		}
		c.cfg.Logger.Debug("sent a report refresh", "nonce", nonce)
	}
}

// report is the ApplyReport of the agent's current checks.
func (c *Client) report(mode switchyardv1.DataplaneMode) *switchyardv1.ApplyReport {
	r := &switchyardv1.ApplyReport{Mode: mode}
	if c.cfg.CurrentSettingsHash != nil {
		r.SettingsHash = c.cfg.CurrentSettingsHash()
	}
	if c.cfg.CurrentDrift != nil {
		r.Drift = c.cfg.CurrentDrift()
	}
	if c.cfg.CurrentDatapath != nil {
		r.Datapath = c.cfg.CurrentDatapath()
	}
	return r
}

// recvErr returns the stream's status when a Send failed with io.EOF (the
// server ended the stream), err otherwise.
func recvErr(stream grpc.BidiStreamingClient[switchyardv1.DeltaSnapshotsRequest, switchyardv1.DeltaSnapshotsResponse], err error) error {
	if !errors.Is(err, io.EOF) {
		return err
	}
	if _, rerr := stream.Recv(); rerr != nil {
		return rerr
	}
	return err
}

// handle answers one response: ACK of a partial part, or apply and ACK or
// NACK of a complete batch.
func (c *Client) handle(ctx context.Context, b *batch, resp *switchyardv1.DeltaSnapshotsResponse) *switchyardv1.DeltaSnapshotsRequest {
	req := &switchyardv1.DeltaSnapshotsRequest{ResponseNonce: resp.GetNonce()}
	if err := validate(resp); err != nil {
		// A NACK of any part abandons the whole batch.
		*b = batch{}
		c.cfg.Logger.Warn("invalid response; NACK, last good state kept", "nonce", resp.GetNonce(), "err", err)
		req.ErrorDetail = status.New(codes.InvalidArgument, err.Error()).Proto()
		if c.cfg.Observer != nil {
			c.cfg.Observer.Nacked()
		}
		return req
	}
	b.add(resp)
	if resp.GetSystemVersion() == "" {
		c.cfg.Logger.Debug("buffered part of a split batch", "nonce", resp.GetNonce(), "resources", len(resp.GetResources()))
		return req
	}
	u := b.take(resp.GetSystemVersion())
	applied, err := c.cfg.Applier.Apply(ctx, u)
	if err != nil {
		c.cfg.Logger.Warn("apply failed; NACK, last good state kept", "systemVersion", u.SystemVersion, "nonce", resp.GetNonce(), "err", err)
		req.ErrorDetail = status.New(codes.Internal, err.Error()).Proto()
		if c.cfg.Observer != nil {
			c.cfg.Observer.Nacked()
		}
		return req
	}
	req.AppliedVersion = u.SystemVersion
	req.Report = c.report(applied.Mode)
	req.Report.ApplyDuration = durationpb.New(applied.Duration)
	if applied.HasLatency {
		req.Report.ProgrammingLatency = durationpb.New(applied.ProgrammingLatency)
	}
	c.cfg.Logger.Debug("applied; ACK", "systemVersion", u.SystemVersion, "nonce", resp.GetNonce(), "applyDuration", applied.Duration)
	c.learn(u)
	return req
}

// learn takes the control-plane addresses of an applied update's
// NodeConfig into the dial list, and hands a new list to OnLearnt. An
// update without a NodeConfig, or whose NodeConfig advertises none,
// changes nothing.
func (c *Client) learn(u *view.Update) {
	var addrs []string
	for _, r := range u.Resources {
		if nc := r.GetNodeConfig(); nc != nil {
			addrs = dedupe(nc.GetControlPlaneAddresses())
		}
	}
	if !c.targets.learn(addrs) {
		return
	}
	c.cfg.Logger.Info("learnt control-plane addresses", "addresses", addrs, "dialOrder", c.targets.addrs())
	if c.cfg.OnLearnt != nil {
		c.cfg.OnLearnt(slices.Clone(addrs))
	}
}

// batch accumulates the parts of a split batch.
type batch struct {
	resources map[string]*switchyardv1.Resource
	removed   []string
	triggers  map[string][]time.Time
}

func (b *batch) add(resp *switchyardv1.DeltaSnapshotsResponse) {
	if b.resources == nil {
		b.resources = make(map[string]*switchyardv1.Resource, len(resp.GetResources()))
	}
	for _, r := range resp.GetResources() {
		b.resources[r.GetName()] = r
	}
	b.removed = append(b.removed, resp.GetRemovedResources()...)
	for _, ct := range resp.GetChangeTriggers() {
		if b.triggers == nil {
			b.triggers = map[string][]time.Time{}
		}
		for _, ts := range ct.GetTriggerTimes() {
			if ts.IsValid() {
				b.triggers[ct.GetName()] = append(b.triggers[ct.GetName()], ts.AsTime())
			}
		}
	}
}

func (b *batch) take(systemVersion string) *view.Update {
	u := &view.Update{SystemVersion: systemVersion, Resources: b.resources, Removed: b.removed, Triggers: b.triggers}
	if u.Resources == nil {
		u.Resources = map[string]*switchyardv1.Resource{}
	}
	*b = batch{}
	return u
}

// validate rejects resources the agent cannot apply: no name, or no body.
func validate(resp *switchyardv1.DeltaSnapshotsResponse) error {
	for i, r := range resp.GetResources() {
		switch {
		case r.GetName() == "":
			return fmt.Errorf("resource %d has no name", i)
		case r.GetService() == nil && r.GetNodeConfig() == nil:
			return fmt.Errorf("resource %q has no body", r.GetName())
		}
	}
	return nil
}
