package server_test

import (
	"context"
	"crypto/tls"
	"log/slog"
	"net"
	"slices"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"go.uber.org/goleak"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	reflectionpb "google.golang.org/grpc/reflection/grpc_reflection_v1"
	"google.golang.org/grpc/status"

	"github.com/switchyard-proxy/switchyard/controlplane/internal/cache"
	"github.com/switchyard-proxy/switchyard/controlplane/internal/cache/cachetest"
	"github.com/switchyard-proxy/switchyard/controlplane/internal/metrics"
	"github.com/switchyard-proxy/switchyard/controlplane/internal/server"
	"github.com/switchyard-proxy/switchyard/controlplane/internal/server/adminauth"
	"github.com/switchyard-proxy/switchyard/controlplane/internal/server/servertest"
	switchyardv1 "github.com/switchyard-proxy/switchyard/proto/switchyard/v1"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// run serves srv on 127.0.0.1 until the test ends and returns its address
// and a function that stops it and returns Serve's result.
func run(t testing.TB, srv *server.Server) (string, func() error) {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ctx, lis) }()
	var result error
	stopped := false
	stop := func() error {
		if !stopped {
			stopped = true
			cancel()
			result = <-done
		}
		return result
	}
	t.Cleanup(func() {
		if err := stop(); err != nil {
			t.Errorf("Serve: %v", err)
		}
	})
	return lis.Addr().String(), stop
}

// newMetrics returns the control plane's metrics on a registry of their
// own, and the registry.
func newMetrics(t *testing.T) (*prometheus.Registry, *metrics.Metrics) {
	t.Helper()
	reg := prometheus.NewPedanticRegistry()
	m, err := metrics.New(reg)
	if err != nil {
		t.Fatal(err)
	}
	return reg, m
}

func logger(t *testing.T) *slog.Logger {
	return slog.New(slog.NewTextHandler(t.Output(), nil))
}

// firstDelta opens a delta stream as node and returns the first response
// or the stream's error. The stream stays open until the test ends.
func firstDelta(t *testing.T, conn *grpc.ClientConn, node string) (*switchyardv1.DeltaSnapshotsResponse, grpc.BidiStreamingClient[switchyardv1.DeltaSnapshotsRequest, switchyardv1.DeltaSnapshotsResponse], error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), servertest.WaitTimeout)
	t.Cleanup(cancel)
	st, err := switchyardv1.NewDiscoveryServiceClient(conn).DeltaSnapshots(ctx)
	if err != nil {
		return nil, nil, err
	}
	if err := st.Send(&switchyardv1.DeltaSnapshotsRequest{Node: &switchyardv1.Node{Name: node}}); err != nil {
		return nil, nil, err
	}
	r, err := st.Recv()
	return r, st, err
}

func TestHealthAndReflection(t *testing.T) {
	srv := server.New(server.Config{}, cache.New(), logger(t), nil)
	addr, _ := run(t, srv)
	conn := servertest.Dial(t, addr)

	health := healthpb.NewHealthClient(conn)
	checkHealth := func(want healthpb.HealthCheckResponse_ServingStatus) {
		t.Helper()
		for _, svc := range []string{"", "switchyard.v1.DiscoveryService", "switchyard.v1.AdminService"} {
			got, err := health.Check(t.Context(), &healthpb.HealthCheckRequest{Service: svc})
			if err != nil || got.GetStatus() != want {
				t.Errorf("health of %q = %v, %v; want %v", svc, got.GetStatus(), err, want)
			}
		}
	}
	checkHealth(healthpb.HealthCheckResponse_NOT_SERVING)
	srv.SetReady(true)
	checkHealth(healthpb.HealthCheckResponse_SERVING)

	want := []string{
		"grpc.health.v1.Health",
		"grpc.reflection.v1.ServerReflection",
		"grpc.reflection.v1alpha.ServerReflection",
		"switchyard.v1.AdminService",
		"switchyard.v1.DiscoveryService",
	}
	if got := listServices(t, conn); !slices.Equal(got, want) {
		t.Errorf("reflection lists %v, want %v", got, want)
	}
}

func TestServeDiscoveryAdminAndMetrics(t *testing.T) {
	c, nv := servertest.Published("n1", cachetest.Services(t, "ns", 2, 0)...)
	reg, m := newMetrics(t)
	addr, stop := run(t, server.New(server.Config{ControlPlaneID: "cp-test"}, c, logger(t), m))
	conn := servertest.Dial(t, addr)

	// Both discovery variants and the admin service answer.
	r, st, err := firstDelta(t, conn, "n1")
	if err != nil || r.GetSystemVersion() != nv.Version() || r.GetControlPlaneId() != "cp-test" {
		t.Fatalf("delta first response %v, %v", r, err)
	}
	if err := st.Send(&switchyardv1.DeltaSnapshotsRequest{ResponseNonce: r.GetNonce(), AppliedVersion: r.GetSystemVersion()}); err != nil {
		t.Fatal(err)
	}
	servertest.Open(t, servertest.SotWWire{}, conn, &switchyardv1.StreamSnapshotsRequest{Node: &switchyardv1.Node{Name: "n2"}}, false)
	servertest.Eventually(t, "ACK and sotw stream recorded", func() bool {
		var acked, n2 bool
		for _, s := range c.Snapshot() {
			acked = acked || (s.Status.Name == "n1" && s.Status.AckedVersion == nv.Version())
			n2 = n2 || (s.Status.Name == "n2" && s.Status.Connected)
		}
		return acked && n2
	})
	nodes, err := switchyardv1.NewAdminServiceClient(conn).ListNodes(t.Context(), &switchyardv1.ListNodesRequest{})
	if err != nil || len(nodes.GetNodes()) != 2 {
		t.Errorf("ListNodes = %v, %v", nodes, err)
	}
	for name, want := range map[string]int{
		"switchyard_controlplane_connected_agents":     2,
		"switchyard_controlplane_responses_sent_total": 1,
		"switchyard_controlplane_ack_latency_seconds":  1,
	} {
		if got, err := testutil.GatherAndCount(reg, name); err != nil || got != want {
			t.Errorf("%s: %d series (%v), want %d", name, got, err, want)
		}
	}

	// Shutdown: streams end with Unavailable, Serve returns nil.
	if err := stop(); err != nil {
		t.Errorf("Serve after shutdown: %v", err)
	}
	if _, err := st.Recv(); status.Code(err) != codes.Unavailable {
		t.Errorf("delta stream after shutdown: %v, want Unavailable", err)
	}
}

func listServices(t *testing.T, conn *grpc.ClientConn) []string {
	t.Helper()
	st, err := reflectionpb.NewServerReflectionClient(conn).ServerReflectionInfo(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = st.CloseSend() }()
	req := &reflectionpb.ServerReflectionRequest{
		MessageRequest: &reflectionpb.ServerReflectionRequest_ListServices{},
	}
	if err := st.Send(req); err != nil {
		t.Fatal(err)
	}
	resp, err := st.Recv()
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, s := range resp.GetListServicesResponse().GetService() {
		names = append(names, s.GetName())
	}
	slices.Sort(names)
	return names
}

func TestMTLSNodeIdentity(t *testing.T) {
	ca := newPKI(t)
	c := cache.New()
	for _, n := range []string{"node-a", "node-b", "node-c"} {
		c.Publish(n, cachetest.NewNodeView(), nil)
	}
	srv := server.New(server.Config{TLS: ca.serverTLS()}, c, logger(t), nil)
	addr, _ := run(t, srv)

	tests := []struct {
		name   string
		client *tls.Config
		node   string
		want   codes.Code
	}{
		{name: "DNS SAN names the node", client: ca.clientTLS("agent", "node-a"), node: "node-a", want: codes.OK},
		{name: "kubelet-style CN", client: ca.clientTLS("system:node:node-b"), node: "node-b", want: codes.OK},
		{name: "plain CN", client: ca.clientTLS("node-c"), node: "node-c", want: codes.OK},
		{name: "another node's SAN", client: ca.clientTLS("agent", "node-a"), node: "node-b", want: codes.PermissionDenied},
		{name: "another node's CN", client: ca.clientTLS("system:node:node-b"), node: "node-c", want: codes.PermissionDenied},
		{name: "CN prefix only", client: ca.clientTLS("system:node:node"), node: "node-a", want: codes.PermissionDenied},
		{name: "untrusted CA", client: newPKI(t).clientTLS("node-a", "node-a"), node: "node-a", want: codes.Unavailable},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.client.RootCAs = ca.Pool
			conn := servertest.Dial(t, addr, grpc.WithTransportCredentials(credentials.NewTLS(tt.client)))
			r, _, err := firstDelta(t, conn, tt.node)
			if got := status.Code(err); got != tt.want {
				t.Fatalf("stream as %q: %v, want %v", tt.node, err, tt.want)
			}
			if tt.want == codes.OK && r.GetSystemVersion() == "" {
				t.Errorf("no view received: %v", r)
			}
			if tt.want == codes.PermissionDenied && !strings.Contains(status.Convert(err).Message(), tt.node) {
				t.Errorf("denial does not name the node: %v", err)
			}
		})
	}
}

// TestMTLSAdminIsForOperators: under mTLS a node's certificate streams its
// own view but may not call AdminService, which would show it every
// node's; a certificate in the admin group may.
func TestMTLSAdminIsForOperators(t *testing.T) {
	ca := newPKI(t)
	c := cache.New()
	c.Publish("node-a", cachetest.NewNodeView(), nil)
	c.Publish("node-b", cachetest.NewNodeView(), nil)
	srv := server.New(server.Config{TLS: ca.serverTLS()}, c, logger(t), nil)
	addr, _ := run(t, srv)
	tests := []struct {
		name   string
		client *tls.Config
		want   codes.Code
	}{
		{"kubelet certificate", ca.operatorTLS("system:node:node-a", "system:nodes"), codes.PermissionDenied},
		{"agent certificate by SAN", ca.clientTLS("agent", "node-a"), codes.PermissionDenied},
		{"operator certificate", ca.operatorTLS("alice", adminauth.DefaultGroup), codes.OK},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			conn := servertest.Dial(t, addr, grpc.WithTransportCredentials(credentials.NewTLS(tt.client)))
			admin := switchyardv1.NewAdminServiceClient(conn)
			_, err := admin.GetNodeView(t.Context(), &switchyardv1.GetNodeViewRequest{NodeName: "node-b"})
			if got := status.Code(err); got != tt.want {
				t.Errorf("GetNodeView(node-b): %v, want %v", err, tt.want)
			}
			_, err = admin.ListNodes(t.Context(), &switchyardv1.ListNodesRequest{})
			if got := status.Code(err); got != tt.want {
				t.Errorf("ListNodes: %v, want %v", err, tt.want)
			}
		})
	}
}

// TestUnknownNodeStreamsBounded: streams for names that are not Nodes hold
// one of --max-unknown-node-streams slots, the next is refused with
// ResourceExhausted and counted, and a real node is never refused.
func TestUnknownNodeStreamsBounded(t *testing.T) {
	c, nv := servertest.Published("n1", cachetest.Services(t, "ns", 1, 0)...)
	_, m := newMetrics(t)
	ready := make(chan struct{})
	close(ready)
	addr, _ := run(t, server.New(server.Config{Ready: ready, MaxUnknownNodeStreams: 1}, c, logger(t), m))
	conn := servertest.Dial(t, addr)

	ghost, err := switchyardv1.NewDiscoveryServiceClient(conn).DeltaSnapshots(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if err := ghost.Send(&switchyardv1.DeltaSnapshotsRequest{Node: &switchyardv1.Node{Name: "ghost-1"}}); err != nil {
		t.Fatal(err)
	}
	servertest.Eventually(t, "ghost-1 holds the one slot", func() bool {
		return testutil.ToFloat64(m.UnknownNodeStreams) == 1
	})
	if _, _, err := firstDelta(t, conn, "ghost-2"); status.Code(err) != codes.ResourceExhausted {
		t.Errorf("ghost-2: %v, want ResourceExhausted", err)
	}
	if got := testutil.ToFloat64(m.UnknownNodeStreamsRefused); got != 1 {
		t.Errorf("unknown_node_streams_refused_total = %v, want 1", got)
	}
	if r, _, err := firstDelta(t, conn, "n1"); err != nil || r.GetSystemVersion() != nv.Version() {
		t.Errorf("n1, a Node, while the slots are full: %v, %v", r, err)
	}
	if err := ghost.CloseSend(); err != nil {
		t.Fatal(err)
	}
	servertest.Eventually(t, "ghost-1's slot freed", func() bool {
		return testutil.ToFloat64(m.UnknownNodeStreams) == 0
	})
}
