package sotw_test

import (
	"fmt"
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

type (
	request  = switchyardv1.StreamSnapshotsRequest
	response = switchyardv1.StreamSnapshotsResponse
)

// serve starts a sotw server of c on 127.0.0.1 and returns a client conn.
func serve(t *testing.T, c *cache.Cache, opts stream.Options) (*sotw.Server, *grpc.ClientConn) {
	t.Helper()
	srv := sotw.New(c, servertest.StreamOptions(t, opts))
	_, conn := servertest.ServeDiscovery(t, srv)
	return srv, conn
}

// open starts a state-of-the-world stream with first; a goroutine
// receives its responses.
func open(t *testing.T, conn *grpc.ClientConn, first *request) *servertest.Agent[*request, *response] {
	t.Helper()
	return servertest.Open(t, servertest.SotWWire{}, conn, first, true)
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
	c, nv1 := servertest.Published("n1", svc(t, 0, 0), svc(t, 1, 0))
	_, conn := serve(t, c, stream.Options{ControlPlaneID: "cp"})
	cl := open(t, conn, &request{Node: &switchyardv1.Node{Name: "n1"}})

	// The whole view, then the whole new view after each change.
	r1 := cl.Recv()
	if diff := cmp.Diff(whole(t, nv1, r1.GetNonce()), r1, protocmp.Transform()); diff != "" {
		t.Errorf("first response (-want +got):\n%s", diff)
	}
	cl.Ack(r1, nil)
	servertest.WaitAcked(t, c, "n1", nv1.Version())

	nv2 := nv1.With(svc(t, 2, 0))
	c.Publish("n1", nv2, []string{"ns/svc-2"})
	r2 := cl.Recv()
	if diff := cmp.Diff(whole(t, nv2, r2.GetNonce()), r2, protocmp.Transform()); diff != "" {
		t.Errorf("second response (-want +got):\n%s", diff)
	}

	// NACK: held while the content stays the same.
	cl.Send(&request{ResponseNonce: r2.GetNonce(), VersionInfo: nv1.Version(), ErrorDetail: &spb.Status{Code: 3, Message: "nope"}})
	servertest.Eventually(t, "NACK", func() bool {
		st := servertest.NodeStatus(c, "n1")
		return st.LastNack != nil && st.Pending.InFlight == 0
	})
	c.Publish("n1", nv2, nil)
	servertest.Eventually(t, "wakeup taken", func() bool { return !servertest.NodeStatus(c, "n1").Pending.DirtyAll })

	nv3 := nv2.With(svc(t, 2, 1))
	c.Publish("n1", nv3, []string{"ns/svc-2"})
	r3 := cl.Recv()
	if r3.GetVersionInfo() != nv3.Version() || len(r3.GetResources()) != 3 {
		t.Errorf("after NACK got version %q with %d resources, want %q with 3", r3.GetVersionInfo(), len(r3.GetResources()), nv3.Version())
	}
	cl.Ack(r3, nil)
	servertest.WaitAcked(t, c, "n1", nv3.Version())
	if st := servertest.NodeStatus(c, "n1"); st.RPC != sotw.RPC || st.LastNack.GetMessage() != "nope" {
		t.Errorf("status %+v", st)
	}
}

func TestUpToDateAgentGetsNothingUntilChange(t *testing.T) {
	c, nv1 := servertest.Published("n1", svc(t, 0, 0))
	_, conn := serve(t, c, stream.Options{})
	cl := open(t, conn, &request{Node: &switchyardv1.Node{Name: "n1"}, VersionInfo: nv1.Version()})
	servertest.Eventually(t, "connected and taken", func() bool {
		st := servertest.NodeStatus(c, "n1")
		return st.Connected && !st.Pending.DirtyAll
	})
	nv2 := nv1.With(svc(t, 1, 0))
	c.Publish("n1", nv2, []string{"ns/svc-1"})
	if got := cl.Recv().GetVersionInfo(); got != nv2.Version() {
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
		r := cl.Recv()
		parts++
		if n := proto.Size(r); n > limit {
			t.Errorf("part of %d bytes over the %d limit", n, limit)
		}
		got = append(got, r.GetResources()...)
		cl.Ack(r, nil)
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
	cl.Recv()
	srv.Shutdown()
	select {
	case <-cl.Done():
		if got := status.Code(cl.Err()); got != codes.Unavailable {
			t.Errorf("stream ended with %v, want Unavailable", got)
		}
	case <-time.After(servertest.WaitTimeout):
		t.Fatal("stream still open after Shutdown")
	}
}
