package sotw_test

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"go.uber.org/goleak"
	spb "google.golang.org/genproto/googleapis/rpc/status"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/testing/protocmp"

	"github.com/switchyard-proxy/switchyard/controlplane/internal/cache"
	"github.com/switchyard-proxy/switchyard/controlplane/internal/cache/cachetest"
	"github.com/switchyard-proxy/switchyard/controlplane/internal/server/servertest"
	"github.com/switchyard-proxy/switchyard/controlplane/internal/server/sotw"
	"github.com/switchyard-proxy/switchyard/controlplane/internal/server/stream"
	switchyardv1 "github.com/switchyard-proxy/switchyard/proto/switchyard/v1"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

const waitTimeout = 10 * time.Second

type (
	request  = switchyardv1.StreamSnapshotsRequest
	response = switchyardv1.StreamSnapshotsResponse
)

// serve starts a sotw server of c on 127.0.0.1 and returns a client conn.
func serve(t *testing.T, c *cache.Cache, opts stream.Options) (*sotw.Server, *grpc.ClientConn) {
	t.Helper()
	opts.CoalesceWindow = 5 * time.Millisecond
	opts.Logger = slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelDebug}))
	srv := sotw.New(c, opts)
	_, conn := servertest.Serve(t, func(g *grpc.Server) { switchyardv1.RegisterDiscoveryServiceServer(g, srv) }, srv.Shutdown)
	return srv, conn
}

// client is a scripted state-of-the-world agent.
type client struct {
	t     *testing.T
	st    grpc.BidiStreamingClient[request, response]
	resps chan *response
	done  chan struct{}
	err   error
}

func open(t *testing.T, conn *grpc.ClientConn, first *request) *client {
	t.Helper()
	ctx, cancel := context.WithCancel(t.Context())
	st, err := switchyardv1.NewDiscoveryServiceClient(conn).StreamSnapshots(ctx)
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	c := &client{t: t, st: st, resps: make(chan *response, 16), done: make(chan struct{})}
	var wg sync.WaitGroup
	t.Cleanup(func() { cancel(); wg.Wait() })
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
	c.send(first)
	return c
}

func (c *client) send(r *request) {
	c.t.Helper()
	if err := c.st.Send(r); err != nil {
		c.t.Fatalf("Send: %v", err)
	}
}

func (c *client) recv() *response {
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

func (c *client) ack(r *response) {
	c.t.Helper()
	c.send(&request{ResponseNonce: r.GetNonce(), VersionInfo: r.GetVersionInfo()})
}

func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(waitTimeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(time.Millisecond) // poll interval
	}
}

func nodeStatus(c *cache.Cache, node string) cache.NodeStatus {
	s, _ := c.Node(node)
	return s.Status
}

func svc(t *testing.T, i int, gen uint32) *cache.View {
	return cachetest.MustView(t, cachetest.Service("ns", fmt.Sprintf("svc-%d", i), fmt.Sprintf("10.96.0.%d", i+1), 1000+gen))
}

func whole(t *testing.T, nv cache.NodeView, nonce string) *response {
	t.Helper()
	res, err := cachetest.Resources(nv)
	if err != nil {
		t.Fatal(err)
	}
	return &response{VersionInfo: nv.Version(), Resources: res, Nonce: nonce, ControlPlaneId: "cp"}
}

func TestStateOfTheWorld(t *testing.T) {
	c := cache.New()
	nv1 := cachetest.NewNodeView(svc(t, 0, 0), svc(t, 1, 0))
	c.Publish("n1", nv1, nil)
	_, conn := serve(t, c, stream.Options{ControlPlaneID: "cp"})
	cl := open(t, conn, &request{Node: &switchyardv1.Node{Name: "n1"}})

	// The whole view, then the whole new view after each change.
	r1 := cl.recv()
	if diff := cmp.Diff(whole(t, nv1, r1.GetNonce()), r1, protocmp.Transform()); diff != "" {
		t.Errorf("first response (-want +got):\n%s", diff)
	}
	cl.ack(r1)
	eventually(t, "ACK", func() bool { return nodeStatus(c, "n1").AckedVersion == nv1.Version() })

	nv2 := nv1.With(svc(t, 2, 0))
	c.Publish("n1", nv2, []string{"ns/svc-2"})
	r2 := cl.recv()
	if diff := cmp.Diff(whole(t, nv2, r2.GetNonce()), r2, protocmp.Transform()); diff != "" {
		t.Errorf("second response (-want +got):\n%s", diff)
	}

	// NACK: held while the content stays the same.
	cl.send(&request{ResponseNonce: r2.GetNonce(), VersionInfo: nv1.Version(), ErrorDetail: &spb.Status{Code: 3, Message: "nope"}})
	eventually(t, "NACK", func() bool { st := nodeStatus(c, "n1"); return st.LastNack != nil && st.Pending.InFlight == 0 })
	c.Publish("n1", nv2, nil)
	eventually(t, "wakeup taken", func() bool { return !nodeStatus(c, "n1").Pending.DirtyAll })

	nv3 := nv2.With(svc(t, 2, 1))
	c.Publish("n1", nv3, []string{"ns/svc-2"})
	r3 := cl.recv()
	if r3.GetVersionInfo() != nv3.Version() || len(r3.GetResources()) != 3 {
		t.Errorf("after NACK got version %q with %d resources, want %q with 3", r3.GetVersionInfo(), len(r3.GetResources()), nv3.Version())
	}
	cl.ack(r3)
	eventually(t, "ACK", func() bool { return nodeStatus(c, "n1").AckedVersion == nv3.Version() })
	if st := nodeStatus(c, "n1"); st.RPC != sotw.RPC || st.LastNack.GetMessage() != "nope" {
		t.Errorf("status %+v", st)
	}
}

func TestUpToDateAgentGetsNothingUntilChange(t *testing.T) {
	c := cache.New()
	nv1 := cachetest.NewNodeView(svc(t, 0, 0))
	c.Publish("n1", nv1, nil)
	_, conn := serve(t, c, stream.Options{})
	cl := open(t, conn, &request{Node: &switchyardv1.Node{Name: "n1"}, VersionInfo: nv1.Version()})
	eventually(t, "connected and taken", func() bool {
		st := nodeStatus(c, "n1")
		return st.Connected && !st.Pending.DirtyAll
	})
	nv2 := nv1.With(svc(t, 1, 0))
	c.Publish("n1", nv2, []string{"ns/svc-1"})
	if got := cl.recv().GetVersionInfo(); got != nv2.Version() {
		t.Errorf("first response has version %q, want %q", got, nv2.Version())
	}
}

func TestSplitWholeView(t *testing.T) {
	const limit = 2048
	c := cache.New()
	var views []*cache.View
	for i := range 100 {
		views = append(views, svc(t, i, 0))
	}
	nv := cachetest.NewNodeView(views...)
	c.Publish("n1", nv, nil)
	_, conn := serve(t, c, stream.Options{MaxMessageBytes: limit})
	cl := open(t, conn, &request{Node: &switchyardv1.Node{Name: "n1"}})
	var got []*switchyardv1.Resource
	parts := 0
	for {
		r := cl.recv()
		parts++
		if n := proto.Size(r); n > limit {
			t.Errorf("part of %d bytes over the %d limit", n, limit)
		}
		got = append(got, r.GetResources()...)
		cl.ack(r)
		if r.GetVersionInfo() != "" {
			break
		}
	}
	want, err := cachetest.Resources(nv)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(want, got, protocmp.Transform()); diff != "" {
		t.Errorf("reassembled (-want +got):\n%s", diff)
	}
	if parts < 2 {
		t.Errorf("%d parts, want a split", parts)
	}
}

func TestShutdownEndsStreams(t *testing.T) {
	c := cache.New()
	c.Publish("n1", cachetest.NewNodeView(), nil)
	srv, conn := serve(t, c, stream.Options{})
	cl := open(t, conn, &request{Node: &switchyardv1.Node{Name: "n1"}})
	cl.recv()
	srv.Shutdown()
	select {
	case <-cl.done:
		if got := status.Code(cl.err); got != codes.Unavailable {
			t.Errorf("stream ended with %v, want Unavailable", got)
		}
	case <-time.After(waitTimeout):
		t.Fatal("stream still open after Shutdown")
	}
}
