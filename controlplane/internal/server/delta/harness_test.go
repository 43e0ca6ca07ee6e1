package delta_test

import (
	"context"
	"log/slog"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"
	spb "google.golang.org/genproto/googleapis/rpc/status"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	"github.com/switchyard-proxy/switchyard/controlplane/internal/cache"
	"github.com/switchyard-proxy/switchyard/controlplane/internal/server/delta"
	"github.com/switchyard-proxy/switchyard/controlplane/internal/server/servertest"
	"github.com/switchyard-proxy/switchyard/controlplane/internal/server/stream"
	switchyardv1 "github.com/switchyard-proxy/switchyard/proto/switchyard/v1"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// waitTimeout bounds every wait on the server; tests never sleep.
const waitTimeout = 10 * time.Second

// counter is a stream.Observer that counts.
type counter struct {
	responses, acks, nacks atomic.Int64
	resumed, sent          atomic.Int64 // delta.ResumeObserver
}

func (c *counter) StreamOpened(string)                       {}
func (c *counter) StreamClosed(string)                       {}
func (c *counter) ResponseSent(string, int)                  { c.responses.Add(1) }
func (c *counter) Acked(string, time.Duration)               { c.acks.Add(1) }
func (c *counter) Nacked(string)                             { c.nacks.Add(1) }
func (c *counter) AgentApplied(time.Duration, time.Duration) {}
func (c *counter) DeltaStreamStarted(resumed, sent int) {
	c.resumed.Add(int64(resumed))
	c.sent.Add(int64(sent))
}

var (
	_ stream.Observer      = (*counter)(nil)
	_ delta.ResumeObserver = (*counter)(nil)
)

// harness is one delta server on a loopback listener and a client conn.
type harness struct {
	addr  string
	srv   *delta.Server
	cache *cache.Cache
	obs   *counter
	conn  *grpc.ClientConn
}

func testLogger(t *testing.T) *slog.Logger {
	return slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelDebug}))
}

// start serves c over 127.0.0.1; opts zero fields get test defaults.
func start(t *testing.T, c *cache.Cache, opts stream.Options) *harness {
	t.Helper()
	obs := &counter{}
	if opts.CoalesceWindow == 0 {
		opts.CoalesceWindow = 5 * time.Millisecond
	}
	if opts.Observer == nil {
		opts.Observer = obs
	}
	if opts.Logger == nil {
		opts.Logger = testLogger(t)
	}
	srv := delta.New(c, opts)
	addr, conn := servertest.Serve(t, func(g *grpc.Server) { switchyardv1.RegisterDiscoveryServiceServer(g, srv) }, srv.Shutdown)
	return &harness{addr: addr, srv: srv, cache: c, obs: obs, conn: conn}
}

// client is a scripted agent on one stream.
type client struct {
	t      *testing.T
	st     grpc.BidiStreamingClient[switchyardv1.DeltaSnapshotsRequest, switchyardv1.DeltaSnapshotsResponse]
	cancel context.CancelFunc
	resps  chan *switchyardv1.DeltaSnapshotsResponse
	done   chan struct{}
	err    error // Recv's error, set before done closes
}

// open starts a stream as node and sends the first request. With read set,
// a goroutine receives responses into c.resps; without, nobody reads.
func (h *harness) open(t *testing.T, node string, initial map[string]string, read bool) *client {
	t.Helper()
	return h.openOn(t, h.conn, node, initial, read)
}

// dial opens another client connection to the server.
func (h *harness) dial(t *testing.T, opts ...grpc.DialOption) *grpc.ClientConn {
	t.Helper()
	opts = append(opts, grpc.WithTransportCredentials(insecure.NewCredentials()))
	conn, err := grpc.NewClient(h.addr, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	return conn
}

func (h *harness) openOn(t *testing.T, conn *grpc.ClientConn, node string, initial map[string]string, read bool) *client {
	t.Helper()
	ctx, cancel := context.WithCancel(t.Context())
	st, err := switchyardv1.NewDiscoveryServiceClient(conn).DeltaSnapshots(ctx)
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	c := &client{t: t, st: st, cancel: cancel, resps: make(chan *switchyardv1.DeltaSnapshotsResponse, 64), done: make(chan struct{})}
	var wg sync.WaitGroup
	t.Cleanup(func() { cancel(); wg.Wait() })
	if read {
		wg.Go(func() {
			defer close(c.done)
			for {
				r, err := st.Recv()
				if err != nil {
					c.err = err
					return
				}
				select {
				case c.resps <- r:
				case <-ctx.Done():
					return
				}
			}
		})
	}
	c.send(&switchyardv1.DeltaSnapshotsRequest{
		Node:                    &switchyardv1.Node{Name: node, AgentVersion: "test"},
		InitialResourceVersions: initial,
	})
	return c
}

func (c *client) send(req *switchyardv1.DeltaSnapshotsRequest) {
	c.t.Helper()
	if err := c.st.Send(req); err != nil {
		c.t.Fatalf("Send: %v", err)
	}
}

// recv returns the next response or fails the test after waitTimeout.
func (c *client) recv() *switchyardv1.DeltaSnapshotsResponse {
	c.t.Helper()
	select {
	case r := <-c.resps:
		return r
	case <-c.done:
		c.t.Fatalf("stream ended: %v", c.err)
	case <-time.After(waitTimeout):
		c.t.Fatal("no response within the deadline")
	}
	return nil
}

// ended waits for the stream to end and returns its status code.
func (c *client) ended() codes.Code {
	c.t.Helper()
	select {
	case r := <-c.resps:
		c.t.Fatalf("unexpected response %v", r)
	case <-c.done:
		return status.Code(c.err)
	case <-time.After(waitTimeout):
		c.t.Fatal("stream did not end within the deadline")
	}
	return codes.OK
}

func (c *client) ack(r *switchyardv1.DeltaSnapshotsResponse, report *switchyardv1.ApplyReport) {
	c.t.Helper()
	c.send(&switchyardv1.DeltaSnapshotsRequest{
		ResponseNonce:  r.GetNonce(),
		AppliedVersion: r.GetSystemVersion(),
		Report:         report,
	})
}

func (c *client) nack(nonce, msg string) {
	c.t.Helper()
	c.send(&switchyardv1.DeltaSnapshotsRequest{
		ResponseNonce: nonce,
		ErrorDetail:   &spb.Status{Code: int32(codes.InvalidArgument), Message: msg},
	})
}

// batch receives parts until a complete one (non-empty system version),
// acknowledging the partial ones as an agent does, and returns all parts.
// The final part is left unanswered.
func (c *client) batch() []*switchyardv1.DeltaSnapshotsResponse {
	c.t.Helper()
	var parts []*switchyardv1.DeltaSnapshotsResponse
	for {
		r := c.recv()
		parts = append(parts, r)
		if r.GetSystemVersion() != "" {
			return parts
		}
		c.ack(r, nil)
	}
}

// eventually polls cond until it holds or waitTimeout passes.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(waitTimeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(time.Millisecond) // poll interval, not a wait for an event
	}
}

// status returns node's cache status or a zero one.
func (h *harness) status(node string) cache.NodeStatus {
	s, _ := h.cache.Node(node)
	return s.Status
}

// openAcked opens node's stream, ACKs its first response and waits until
// the cache records nv as acked: the starting point of most tests.
func (h *harness) openAcked(t *testing.T, node string, nv cache.NodeView) *client {
	t.Helper()
	cl := h.open(t, node, nil, true)
	cl.ack(cl.recv(), nil)
	eventually(t, "ACK", func() bool { return h.status(node).AckedVersion == nv.Version() })
	return cl
}
