package stream

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"time"

	spb "google.golang.org/genproto/googleapis/rpc/status"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"k8s.io/utils/clock"

	"github.com/switchyard-proxy/switchyard/controlplane/internal/cache"
	"github.com/switchyard-proxy/switchyard/controlplane/internal/server/wire"
	switchyardv1 "github.com/switchyard-proxy/switchyard/proto/switchyard/v1"
)

// DefaultCoalesceWindow is how long a session waits after a change before
// taking the node's view, so that bursts become one response.
const DefaultCoalesceWindow = 100 * time.Millisecond

// DefaultNackRetry and DefaultNackRetryMax bound the backoff after which a
// rejected version is sent again: 1 s, doubled per consecutive NACK, at
// most 30 s. An agent NACKs when its kernel refused the change — often a
// transient failure (the xtables lock, a netlink error), which kube-proxy
// would retry at its next sync; holding the version until the view
// changes would leave the node stale for as long as nothing else changes.
const (
	DefaultNackRetry    = time.Second
	DefaultNackRetryMax = 30 * time.Second
)

// Request is what both variants' requests share (their generated getters).
type Request interface {
	GetNode() *switchyardv1.Node
	GetResponseNonce() string
	GetErrorDetail() *spb.Status
	GetReport() *switchyardv1.ApplyReport
}

// Stream is the server side of a discovery stream;
// grpc.BidiStreamingServer[Req, Resp] satisfies it. Responses go out
// through SendMsg as a *wire.Message, which the server's codec encodes
// from the views' shared bytes; any other codec sees the response.
type Stream[Req Request, Resp proto.Message] interface {
	Context() context.Context
	Recv() (Req, error)
	SendMsg(m any) error
}

// Variant is what one wire variant adds to a session.
type Variant[Resp proto.Message] interface {
	// Plan returns the batch that brings the agent from the state it has
	// acknowledged to nv; changes names what may differ from that state.
	// first is set until the session sent its first batch. An empty batch
	// sends nothing.
	Plan(nv cache.NodeView, changes cache.Changes, first bool) Batch
	// Applied records that the agent acknowledged a whole batch: its state
	// is now target.
	Applied(target cache.NodeView)
	// Response builds the response for one part; version is empty on every
	// part but a batch's last.
	Response(p Part, version, nonce string) Resp
}

// Options configure the sessions of one wire variant.
type Options struct {
	// RPC names the variant ("delta", "sotw") in metrics, logs and the
	// cache's node status.
	RPC string
	// ControlPlaneID identifies this replica in responses.
	ControlPlaneID string
	// CoalesceWindow defaults to DefaultCoalesceWindow.
	CoalesceWindow time.Duration
	// NackRetry and NackRetryMax: the backoff before a rejected version
	// is sent again (DefaultNackRetry, DefaultNackRetryMax when zero).
	NackRetry, NackRetryMax time.Duration
	// MaxMessageBytes bounds one encoded response; larger batches are split.
	// Defaults to DefaultMaxMessageBytes.
	MaxMessageBytes int
	// Authorizer defaults to AllowAll.
	Authorizer Authorizer
	// Observer defaults to recording nothing.
	Observer Observer
	// Clock defaults to the real clock.
	Clock clock.Clock
	// Logger defaults to discarding.
	Logger *slog.Logger
	// Closing, once closed, ends every session with codes.Unavailable.
	Closing <-chan struct{}
	// Settings, when set, is shown the settings hash each agent reports
	// on its first request.
	Settings SettingsChecker
	// Strangers, when set, bounds the streams of names that are not
	// Nodes; shared by both variants' options.
	Strangers *Strangers
	// Triggers, when set, gives the trigger times sessions attach to the
	// resources of every batch but a stream's first.
	Triggers TriggerSource
}

// TriggerSource gives the trigger times of a resource's changes published
// in generations since..until that reached node (0 since: none);
// *fleetlatency.Tracker implements it.
type TriggerSource interface {
	Triggers(name string, since, until uint64, node string) []time.Time
}

// SettingsChecker compares the NodeConfig settings an agent programs
// with this replica's, and reports when they differ;
// *settings.Source implements it.
type SettingsChecker interface {
	CheckAgent(node, agentHash string) bool
}

// WithDefaults returns o with zero fields set to their defaults.
func (o Options) WithDefaults() Options {
	if o.CoalesceWindow <= 0 {
		o.CoalesceWindow = DefaultCoalesceWindow
	}
	if o.MaxMessageBytes <= 0 {
		o.MaxMessageBytes = DefaultMaxMessageBytes
	}
	if o.NackRetry <= 0 {
		o.NackRetry = DefaultNackRetry
	}
	if o.NackRetryMax <= 0 {
		o.NackRetryMax = DefaultNackRetryMax
	}
	if o.Authorizer == nil {
		o.Authorizer = AllowAll{}
	}
	if o.Observer == nil {
		o.Observer = nopObserver{}
	}
	if o.Clock == nil {
		o.Clock = clock.RealClock{}
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	return o
}

// Serve runs one discovery stream until it ends. newVariant builds the
// variant from the stream's first request, which must name the node.
func Serve[Req Request, Resp proto.Message](
	st Stream[Req, Resp], c *cache.Cache, o Options, newVariant func(first Req) (Variant[Resp], error),
) error {
	o = o.WithDefaults()
	ctx, cancel := context.WithCancel(st.Context())
	defer cancel()
	reqs, recvErr := receive(ctx, st.Recv)

	first, err := awaitFirst(ctx, o.Closing, reqs, recvErr)
	if err != nil {
		return err
	}
	agent := first.GetNode()
	name := agent.GetName()
	if name == "" {
		return status.Error(codes.InvalidArgument, "the first request must carry node.name")
	}
	if err := o.Authorizer.Authorize(ctx, name); err != nil {
		return denied(name, err)
	}
	release, err := o.Strangers.Admit(ctx, o.Closing, name)
	if err != nil {
		o.Logger.Warn("agent stream refused", "node", name, "rpc", o.RPC, "err", err)
		return err
	}
	defer release()
	v, err := newVariant(first)
	if err != nil {
		return status.Errorf(codes.InvalidArgument, "node %q: %v", name, err)
	}

	w := c.Watch(name, agent, o.RPC)
	defer w.Close()
	o.Observer.StreamOpened(o.RPC)
	defer o.Observer.StreamClosed(o.RPC)

	log := o.Logger.With("node", name, "rpc", o.RPC)
	log.Info("agent connected", "agentVersion", agent.GetAgentVersion(), "mode", agent.GetMode().String(),
		"settingsHash", agent.GetSettingsHash())
	if o.Settings != nil {
		o.Settings.CheckAgent(name, agent.GetSettingsHash())
	}
	s := &session[Req, Resp]{
		o:       o,
		log:     log,
		node:    name,
		watch:   w,
		variant: v,
		out:     send(ctx, func(m *wire.Message) error { return st.SendMsg(m) }),
	}
	err = s.run(ctx, reqs, recvErr)
	log.Info("agent disconnected", "code", status.Code(err).String())
	return err
}

// awaitFirst waits for a stream's first request.
func awaitFirst[Req any](ctx context.Context, closing <-chan struct{}, reqs <-chan Req, recvErr func() error) (Req, error) {
	var zero Req
	select {
	case <-ctx.Done():
		return zero, status.FromContextError(ctx.Err()).Err()
	case <-closing:
		return zero, errClosing
	case req, ok := <-reqs:
		if !ok {
			return zero, endOfRequests(ctx, recvErr())
		}
		return req, nil
	}
}

var errClosing = status.Error(codes.Unavailable, "control plane is shutting down")

// endOfRequests maps the error that ended the receive loop to the stream's
// result: a client that half-closed ends the stream cleanly.
func endOfRequests(ctx context.Context, err error) error {
	switch {
	case errors.Is(err, io.EOF):
		return nil
	case err != nil:
		return err
	case ctx.Err() != nil:
		return status.FromContextError(ctx.Err()).Err()
	}
	return status.Error(codes.Internal, "request stream ended without an error")
}

// denied turns an authorizer's refusal into a status error.
func denied(node string, err error) error {
	if st, ok := status.FromError(err); ok && st.Code() != codes.Unknown {
		return err
	}
	return status.Errorf(codes.PermissionDenied, "node %q: %v", node, err)
}

// receive reads requests in its own goroutine until Recv fails or ctx ends;
// the channel closes then, and recvErr returns Recv's error (nil when ctx
// ended first). The goroutine may outlive the handler until gRPC cancels the
// stream, which unblocks Recv.
func receive[Req any](ctx context.Context, recv func() (Req, error)) (<-chan Req, func() error) {
	ch := make(chan Req)
	var err error
	go func() {
		defer close(ch)
		for {
			req, e := recv()
			if e != nil {
				err = e
				return
			}
			select {
			case ch <- req:
			case <-ctx.Done():
				return
			}
		}
	}()
	// err is written before close(ch), and read only after ch is closed.
	return ch, func() error { return err }
}

// sender sends responses in its own goroutine, so that a client that stops
// reading blocks only that goroutine, never the session: the session keeps
// serving ACKs, replacement and shutdown, and when the handler returns gRPC
// cancels the stream, which unblocks Send.
type sender[Resp any] struct {
	in       chan Resp  // capacity 1; holds at most the one in-flight response
	errc     chan error // capacity 1; Send's first error
	finished chan struct{}
}

func send[Resp any](ctx context.Context, fn func(Resp) error) *sender[Resp] {
	s := &sender[Resp]{in: make(chan Resp, 1), errc: make(chan error, 1), finished: make(chan struct{})}
	go func() {
		defer close(s.finished)
		for {
			select {
			case <-ctx.Done():
				return
			case r, ok := <-s.in:
				if !ok {
					return
				}
				if err := fn(r); err != nil {
					s.errc <- err
					return
				}
			}
		}
	}()
	return s
}

// drain sends what is queued, then stops the sender: a client that
// half-closes (grpcurl with one request) still gets the response it asked
// for before the stream ends. Nothing may be queued after drain.
func (s *sender[Resp]) drain(ctx context.Context) error {
	close(s.in)
	select {
	case <-s.finished:
	case <-ctx.Done():
		return status.FromContextError(ctx.Err()).Err()
	}
	select {
	case err := <-s.errc:
		return err
	default:
		return nil
	}
}
