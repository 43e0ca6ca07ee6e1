package delta_test

import (
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"
	spb "google.golang.org/genproto/googleapis/rpc/status"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"

	"github.com/switchyard-proxy/switchyard/controlplane/internal/cache"
	"github.com/switchyard-proxy/switchyard/controlplane/internal/server/delta"
	"github.com/switchyard-proxy/switchyard/controlplane/internal/server/servertest"
	"github.com/switchyard-proxy/switchyard/controlplane/internal/server/stream"
	switchyardv1 "github.com/switchyard-proxy/switchyard/proto/switchyard/v1"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// counter is a stream.Observer that counts.
type counter struct {
	responses, acks, nacks atomic.Int64
	missing                atomic.Int64 // agents without a Node object
	resumed, sent          atomic.Int64 // delta.ResumeObserver
}

func (c *counter) StreamOpened(string) {}
func (c *counter) NodeMissing(missing bool) {
	if missing {
		c.missing.Add(1)
	} else {
		c.missing.Add(-1)
	}
}
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

type (
	request  = switchyardv1.DeltaSnapshotsRequest
	response = switchyardv1.DeltaSnapshotsResponse
)

// harness is one delta server on a loopback listener and a client conn.
type harness struct {
	addr  string
	srv   *delta.Server
	cache *cache.Cache
	obs   *counter
	conn  *grpc.ClientConn
}

// start serves c over 127.0.0.1; opts zero fields get test defaults.
func start(t *testing.T, c *cache.Cache, opts stream.Options) *harness {
	t.Helper()
	obs := &counter{}
	if opts.Observer == nil {
		opts.Observer = obs
	}
	srv := delta.New(c, servertest.StreamOptions(t, opts))
	addr, conn := servertest.ServeDiscovery(t, srv)
	return &harness{addr: addr, srv: srv, cache: c, obs: obs, conn: conn}
}

// client is a scripted agent on one stream.
type client struct {
	*servertest.Agent[*request, *response]
}

// open starts a stream as node and sends the first request. With read set,
// a goroutine receives responses; without, nobody reads.
func (h *harness) open(t *testing.T, node string, initial map[string]string, read bool) client {
	t.Helper()
	return h.openOn(t, h.conn, node, initial, read)
}

func (h *harness) openOn(t *testing.T, conn *grpc.ClientConn, node string, initial map[string]string, read bool) client {
	t.Helper()
	return client{servertest.Open(t, servertest.DeltaWire{}, conn, &request{
		Node:                    &switchyardv1.Node{Name: node, AgentVersion: "test"},
		InitialResourceVersions: initial,
	}, read)}
}

func (c client) nack(nonce, msg string) {
	c.Send(&request{
		ResponseNonce: nonce,
		ErrorDetail:   &spb.Status{Code: int32(codes.InvalidArgument), Message: msg},
	})
}

// batch receives parts until a complete one (non-empty system version),
// acknowledging the partial ones as an agent does, and returns all parts.
// The final part is left unanswered.
func (c client) batch() []*response {
	var parts []*response
	for {
		r := c.Recv()
		parts = append(parts, r)
		if r.GetSystemVersion() != "" {
			return parts
		}
		c.Ack(r, nil)
	}
}

// status returns node's cache status or a zero one.
func (h *harness) status(node string) cache.NodeStatus {
	return servertest.NodeStatus(h.cache, node)
}

// openAcked opens node's stream, ACKs its first response and waits until
// the cache records nv as acked: the starting point of most tests.
func (h *harness) openAcked(t *testing.T, node string, nv cache.NodeView) client {
	t.Helper()
	cl := h.open(t, node, nil, true)
	cl.Ack(cl.Recv(), nil)
	servertest.WaitAcked(t, h.cache, node, nv.Version())
	return cl
}
