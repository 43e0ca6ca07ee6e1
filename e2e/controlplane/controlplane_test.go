package controlplane_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/switchyard-proxy/switchyard/e2e/testbed/apiserver"
	eps "github.com/switchyard-proxy/switchyard/e2e/testbed/slices"
	switchyardv1 "github.com/switchyard-proxy/switchyard/proto/switchyard/v1"
)

const ns = "web"

// withFixture starts an API server holding the fixture (fixture) and
// returns it and the fixture's EndpointSlice client, with a context for
// the test's calls that ends after two minutes or with the test.
func withFixture(t *testing.T) (context.Context, *apiserver.Server, *eps.Client) {
	t.Helper()
	api := apiserver.Start(t)
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	t.Cleanup(cancel)
	return ctx, api, fixture(ctx, t, api)
}

// fixture creates the namespace, two nodes and one ClusterIP service with
// one endpoint through the real API server.
func fixture(ctx context.Context, t *testing.T, api *apiserver.Server) *eps.Client {
	t.Helper()
	cs := api.Client()
	if _, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	for _, n := range []struct{ name, zone, ip string }{{"node-a", "z1", "10.200.0.10"}, {"node-b", "z2", "10.200.0.11"}} {
		node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: n.name, Labels: map[string]string{corev1.LabelTopologyZone: n.zone}}}
		created, err := cs.CoreV1().Nodes().Create(ctx, node, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		created.Status.Addresses = []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: n.ip}}
		if _, err := cs.CoreV1().Nodes().UpdateStatus(ctx, created, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "front"},
		// A fixed cluster IP: the README's examples name it.
		Spec: corev1.ServiceSpec{ClusterIP: "10.96.0.10", Ports: []corev1.ServicePort{{Name: "http", Protocol: corev1.ProtocolTCP, Port: 80}}},
	}
	if _, err := cs.CoreV1().Services(ns).Create(ctx, svc, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	sc := eps.New(cs)
	if _, err := sc.Create(ctx, frontSlice("10.244.0.5")); err != nil {
		t.Fatal(err)
	}
	return sc
}

func frontSlice(addrs ...string) eps.Slice {
	s := eps.Slice{Namespace: ns, Service: "front", Suffix: "a", Ports: []eps.Port{eps.TCP("http", 8080)}}
	for _, a := range addrs {
		s.Endpoints = append(s.Endpoints, eps.Ready(a).OnNode("node-a").InZone("z1"))
	}
	return s
}

// deltaClient is a scripted agent on the DeltaSnapshots stream.
type deltaClient struct {
	t      *testing.T
	stream grpc.BidiStreamingClient[switchyardv1.DeltaSnapshotsRequest, switchyardv1.DeltaSnapshotsResponse]
	have   map[string]string // name → version applied
}

func dial(t *testing.T, addr string) *grpc.ClientConn {
	t.Helper()
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return conn
}

func openDelta(ctx context.Context, t *testing.T, conn *grpc.ClientConn, node string, initial map[string]string) *deltaClient {
	t.Helper()
	return openDeltaAs(ctx, t, conn, &switchyardv1.Node{Name: node, AgentVersion: "e2e"}, initial)
}

// openDeltaAs opens a stream whose first request names node as given.
func openDeltaAs(ctx context.Context, t *testing.T, conn *grpc.ClientConn, node *switchyardv1.Node, initial map[string]string) *deltaClient {
	t.Helper()
	st, err := switchyardv1.NewDiscoveryServiceClient(conn).DeltaSnapshots(ctx)
	if err != nil {
		t.Fatal(err)
	}
	err = st.Send(&switchyardv1.DeltaSnapshotsRequest{Node: node, InitialResourceVersions: initial})
	if err != nil {
		t.Fatal(err)
	}
	have := map[string]string{}
	for k, v := range initial {
		have[k] = v
	}
	return &deltaClient{t: t, stream: st, have: have}
}

// next receives one complete response, applies it to have and ACKs it.
func (c *deltaClient) next() *switchyardv1.DeltaSnapshotsResponse {
	c.t.Helper()
	resp, err := c.stream.Recv()
	if err != nil {
		c.t.Fatalf("recv: %v", err)
	}
	for _, r := range resp.GetResources() {
		c.have[r.GetName()] = r.GetVersion()
	}
	for _, name := range resp.GetRemovedResources() {
		delete(c.have, name)
	}
	if err := c.stream.Send(&switchyardv1.DeltaSnapshotsRequest{
		ResponseNonce: resp.GetNonce(), AppliedVersion: resp.GetSystemVersion(),
		Report: &switchyardv1.ApplyReport{},
	}); err != nil {
		c.t.Fatalf("ack: %v", err)
	}
	return resp
}

func names(rs []*switchyardv1.Resource) []string {
	var out []string
	for _, r := range rs {
		out = append(out, r.GetName())
	}
	slices.Sort(out)
	return out
}

func endpointsOf(resp *switchyardv1.DeltaSnapshotsResponse, name string) []string {
	for _, r := range resp.GetResources() {
		if r.GetName() != name {
			continue
		}
		var out []string
		for _, ep := range r.GetService().GetClusterEndpoints() {
			out = append(out, ep.GetAddress())
		}
		slices.Sort(out)
		return out
	}
	return nil
}

// TestControlPlaneAgainstRealAPIServer drives the real binary through
// create, update and delete of a Service and its EndpointSlices in a real
// kube-apiserver, and checks the deltas a connected agent receives.
func TestControlPlaneAgainstRealAPIServer(t *testing.T) {
	ctx, api, sc := withFixture(t)
	cp := startControlPlane(t, api)
	conn := dial(t, cp.grpc)

	a := openDelta(ctx, t, conn, "node-a", nil)
	first := a.next()
	if got, want := names(first.GetResources()), []string{"default/kubernetes", "node-a", "web/front"}; !slices.Equal(got, want) {
		t.Fatalf("first response resources %v, want %v", got, want)
	}
	if got := endpointsOf(first, "web/front"); !slices.Equal(got, []string{"10.244.0.5"}) {
		t.Fatalf("web/front endpoints %v, want [10.244.0.5]", got)
	}
	if first.GetSystemVersion() == "" || first.GetControlPlaneId() != "cp-test" {
		t.Errorf("first response version %q id %q", first.GetSystemVersion(), first.GetControlPlaneId())
	}

	// Scale up: only the changed service comes, with both endpoints.
	if _, err := sc.Update(ctx, frontSlice("10.244.0.5", "10.244.0.6")); err != nil {
		t.Fatal(err)
	}
	up := a.next()
	if got := names(up.GetResources()); !slices.Equal(got, []string{"web/front"}) {
		t.Fatalf("after scale-up got resources %v, want only web/front", got)
	}
	if got := endpointsOf(up, "web/front"); !slices.Equal(got, []string{"10.244.0.5", "10.244.0.6"}) {
		t.Fatalf("after scale-up endpoints %v", got)
	}
	// Another agent starting with the services' current versions (as one
	// restored from disk would) gets only the difference: its own config.
	initial := map[string]string{}
	for name, v := range a.have {
		if name != "node-a" {
			initial[name] = v
		}
	}
	b := openDelta(ctx, t, conn, "node-b", initial)
	if got := names(b.next().GetResources()); !slices.Equal(got, []string{"node-b"}) {
		t.Errorf("reconnect with current versions got %v, want only node-b's config", got)
	}

	// Delete the EndpointSlice: the service stays, with no endpoints at
	// all, so the dataplane must reject rather than drop.
	if err := sc.Delete(ctx, ns, "front", "a"); err != nil {
		t.Fatal(err)
	}
	empty := a.next()
	if got := names(empty.GetResources()); !slices.Equal(got, []string{"web/front"}) {
		t.Fatalf("after slice delete got resources %v, want only web/front", got)
	}
	for _, r := range empty.GetResources() {
		if sv := r.GetService(); len(sv.GetClusterEndpoints()) != 0 || sv.GetHasAnyEndpoints() {
			t.Fatalf("after slice delete web/front = %v, want no endpoints and has_any_endpoints false", sv)
		}
	}

	// Delete the service: its name comes in removed_resources.
	if err := api.Client().CoreV1().Services(ns).Delete(ctx, "front", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	gone := a.next()
	if !slices.Equal(gone.GetRemovedResources(), []string{"web/front"}) {
		t.Fatalf("after delete removed=%v resources=%v", gone.GetRemovedResources(), names(gone.GetResources()))
	}

	// The admin view shows node-a connected with acked == desired.
	admin := switchyardv1.NewAdminServiceClient(conn)
	eventually(ctx, t, "node-a acked its desired version", func() bool {
		resp, err := admin.ListNodes(ctx, &switchyardv1.ListNodesRequest{})
		if err != nil {
			t.Fatalf("ListNodes: %v", err)
		}
		for _, n := range resp.GetNodes() {
			if n.GetName() == "node-a" {
				return n.GetConnected() && n.GetDesiredVersion() != "" && n.GetAckedVersion() == n.GetDesiredVersion()
			}
		}
		return false
	})
}
