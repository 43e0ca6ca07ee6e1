package admin_test

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"go.uber.org/goleak"
	spb "google.golang.org/genproto/googleapis/rpc/status"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/testing/protocmp"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/switchyard-proxy/switchyard/controlplane/internal/apistatus"
	"github.com/switchyard-proxy/switchyard/controlplane/internal/cache"
	"github.com/switchyard-proxy/switchyard/controlplane/internal/cache/cachetest"
	"github.com/switchyard-proxy/switchyard/controlplane/internal/server/admin"
	"github.com/switchyard-proxy/switchyard/controlplane/internal/server/servertest"
	switchyardv1 "github.com/switchyard-proxy/switchyard/proto/switchyard/v1"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

func serve(t *testing.T, c *cache.Cache) switchyardv1.AdminServiceClient {
	t.Helper()
	_, cl := servertest.ServeAdmin(t, admin.New(c, nil, nil))
	return cl
}

// fixture: node-a connected and acked at v1, then given v2 in which web
// changed; node-b known, never connected; node-x connected but unknown.
type fixture struct {
	now          time.Time
	webV1, webV2 *cache.View
	db           *cache.View
	a1, a2, b    *cachetest.NodeView
	agentA       *switchyardv1.Node
	nack         *spb.Status
}

func setup(t *testing.T) (*cache.Cache, fixture) {
	f := fixture{now: time.Date(2030, 5, 6, 7, 8, 9, 0, time.UTC)}
	c := cache.New(cache.WithClock(clocktesting.NewFakePassiveClock(f.now)))
	f.webV1 = cachetest.MustView(t, cachetest.Service("default", "web", "10.96.0.10", 80))
	f.webV2 = cachetest.MustView(t, cachetest.Service("default", "web", "10.96.0.10", 8080))
	f.db = cachetest.MustView(t, cachetest.Service("default", "db", "10.96.0.20", 5432))
	f.a1 = cachetest.NewNodeView(cachetest.MustView(t, cachetest.NodeConfig("node-a", "zone-1")), f.webV1, f.db)
	f.a2 = f.a1.With(f.webV2)
	f.b = cachetest.NewNodeView(cachetest.MustView(t, cachetest.NodeConfig("node-b", "zone-2")), f.webV2)
	f.agentA = &switchyardv1.Node{Name: "node-a", AgentVersion: "v0.1.0", Mode: switchyardv1.DataplaneMode_DATAPLANE_MODE_IPTABLES}
	f.nack = &spb.Status{Code: int32(codes.InvalidArgument), Message: "bad port"}

	c.Publish("node-a", f.a1, nil)
	c.Publish("node-b", f.b, nil)
	w := c.Watch("node-a", f.agentA, "delta")
	w.Acked(f.a1, &switchyardv1.ApplyReport{
		ApplyDuration:      durationpb.New(12 * time.Millisecond),
		ProgrammingLatency: durationpb.New(900 * time.Millisecond),
		Drift: &switchyardv1.DriftStatus{LastCheck: timestamppb.New(f.now), LastDrift: timestamppb.New(f.now),
			LastDriftDetail: []string{"chain KUBE-SVC-X"}, Repairs: 1},
	})
	c.Publish("node-a", f.a2, []string{"default/web"})
	w.Nacked(f.nack)
	c.Watch("node-x", &switchyardv1.Node{Name: "node-x"}, "sotw")
	return c, f
}

func TestListNodes(t *testing.T) {
	c, f := setup(t)
	got, err := serve(t, c).ListNodes(t.Context(), &switchyardv1.ListNodesRequest{})
	if err != nil {
		t.Fatal(err)
	}
	ts := timestamppb.New(f.now)
	want := &switchyardv1.ListNodesResponse{Nodes: []*switchyardv1.NodeStatus{
		{
			Name:                       "node-a",
			Zone:                       "zone-1",
			Connected:                  true,
			Agent:                      f.agentA,
			ConnectedSince:             ts,
			DesiredVersion:             f.a2.Version(),
			AckedVersion:               f.a1.Version(),
			LastNack:                   f.nack,
			LastNackTime:               ts,
			LastApplyDuration:          durationpb.New(12 * time.Millisecond),
			LastProgrammingLatency:     durationpb.New(900 * time.Millisecond),
			LastProgrammingLatencyTime: ts,
			NodeObject:                 switchyardv1.NodeObject_NODE_OBJECT_PRESENT,
			ResourceCount:              3,
			LastAckTime:                ts,
			Rpc:                        "delta",
			Drift: &switchyardv1.DriftStatus{LastCheck: ts, LastDrift: ts,
				LastDriftDetail: []string{"chain KUBE-SVC-X"}, Repairs: 1},
			SettingsSource: "cluster",
		},
		{Name: "node-b", Zone: "zone-2", DesiredVersion: f.b.Version(), ResourceCount: 2, SettingsSource: "cluster",
			NodeObject: switchyardv1.NodeObject_NODE_OBJECT_PRESENT},
		// An agent connected for a name with no Node object.
		{Name: "node-x", Connected: true, Agent: &switchyardv1.Node{Name: "node-x"}, ConnectedSince: ts, Rpc: "sotw",
			NodeObject: switchyardv1.NodeObject_NODE_OBJECT_MISSING},
	}}
	if diff := cmp.Diff(want, got, protocmp.Transform()); diff != "" {
		t.Errorf("ListNodes (-want +got):\n%s", diff)
	}
}

func TestGetNodeView(t *testing.T) {
	c, f := setup(t)
	client := serve(t, c)
	wantRes, err := cachetest.Resources(f.a2)
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		node string
		want *switchyardv1.GetNodeViewResponse
		code codes.Code
	}{
		{name: "known", node: "node-a", want: &switchyardv1.GetNodeViewResponse{Version: f.a2.Version(), Resources: wantRes}},
		{name: "connected but unknown", node: "node-x", code: codes.NotFound},
		{name: "never heard of", node: "nope", code: codes.NotFound},
		{name: "empty name", code: codes.InvalidArgument},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := client.GetNodeView(t.Context(), &switchyardv1.GetNodeViewRequest{NodeName: tt.node})
			if status.Code(err) != tt.code {
				t.Fatalf("error %v, want code %v", err, tt.code)
			}
			if diff := cmp.Diff(tt.want, got, protocmp.Transform()); diff != "" {
				t.Errorf("GetNodeView (-want +got):\n%s", diff)
			}
		})
	}
}

func TestGetService(t *testing.T) {
	c, f := setup(t)
	client := serve(t, c)
	decode := func(v *cache.View) *switchyardv1.ServiceView {
		r, err := cache.Decode(v)
		if err != nil {
			t.Fatal(err)
		}
		return r.GetService()
	}
	tests := []struct {
		name      string
		namespace string
		svc       string
		want      *switchyardv1.GetServiceResponse
		code      codes.Code
	}{
		{
			name: "changed on node-a, not yet acked there", namespace: "default", svc: "web",
			want: &switchyardv1.GetServiceResponse{Nodes: []*switchyardv1.ServiceNodeStatus{
				{NodeName: "node-a", DesiredVersion: f.webV2.Version, Acked: false, View: decode(f.webV2)},
				{NodeName: "node-b", DesiredVersion: f.webV2.Version, Acked: false, View: decode(f.webV2)},
			}, TotalNodes: 2, Summary: "live on 0 of 2 nodes"},
		},
		{
			name: "unchanged and acked", namespace: "default", svc: "db",
			want: &switchyardv1.GetServiceResponse{Nodes: []*switchyardv1.ServiceNodeStatus{
				{NodeName: "node-a", DesiredVersion: f.db.Version, Acked: true, View: decode(f.db)},
			}, AppliedNodes: 1, TotalNodes: 1, Summary: "live on 1 of 1 node"},
		},
		{name: "on no node", namespace: "default", svc: "gone", code: codes.NotFound},
		{name: "no namespace", svc: "web", code: codes.InvalidArgument},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := client.GetService(t.Context(), &switchyardv1.GetServiceRequest{Namespace: tt.namespace, Name: tt.svc})
			if status.Code(err) != tt.code {
				t.Fatalf("error %v, want code %v", err, tt.code)
			}
			if diff := cmp.Diff(tt.want, got, protocmp.Transform()); diff != "" {
				t.Errorf("GetService (-want +got):\n%s", diff)
			}
		})
	}
}

// TestListNodesShowsAppliedMode: after a NodeConfig switched an agent's
// mode or settings, ListNodes shows those of its latest ACK report, not
// the ones its stream opened with.
func TestListNodesShowsAppliedMode(t *testing.T) {
	iptables := switchyardv1.DataplaneMode_DATAPLANE_MODE_IPTABLES
	nftables := switchyardv1.DataplaneMode_DATAPLANE_MODE_NFTABLES
	tests := []struct {
		name    string
		reports []*switchyardv1.ApplyReport
		want    switchyardv1.DataplaneMode
		// wantHash is the settings hash shown; empty: the stream's h1.
		wantHash string
	}{
		{name: "no ACK yet: the stream's", want: iptables},
		{name: "ACK without a report", reports: []*switchyardv1.ApplyReport{nil}, want: iptables},
		{name: "report from an agent without the field", reports: []*switchyardv1.ApplyReport{{}}, want: iptables},
		{name: "switched by a NodeConfig", reports: []*switchyardv1.ApplyReport{{Mode: iptables}, {Mode: nftables}}, want: nftables},
		{name: "a later report without the field keeps it", reports: []*switchyardv1.ApplyReport{{Mode: nftables}, {}}, want: nftables},
		{name: "settings only: the mode stays", reports: []*switchyardv1.ApplyReport{{SettingsHash: "h2"}}, want: iptables, wantHash: "h2"},
		{name: "settings switched with the mode", reports: []*switchyardv1.ApplyReport{{Mode: nftables, SettingsHash: "h2"}, {}}, want: nftables, wantHash: "h2"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c := cache.New()
			nv := cachetest.NewNodeView(cachetest.MustView(t, cachetest.NodeConfig("node-a", "zone-1")))
			c.Publish("node-a", nv, nil)
			agent := &switchyardv1.Node{Name: "node-a", Mode: iptables, SettingsHash: "h1"}
			w := c.Watch("node-a", agent, "delta")
			before, err := serve(t, c).ListNodes(t.Context(), &switchyardv1.ListNodesRequest{})
			if err != nil {
				t.Fatal(err)
			}
			for _, r := range tc.reports {
				w.Acked(nv, r)
			}
			got, err := serve(t, c).ListNodes(t.Context(), &switchyardv1.ListNodesRequest{})
			if err != nil {
				t.Fatal(err)
			}
			if m := got.GetNodes()[0].GetAgent().GetMode(); m != tc.want {
				t.Errorf("agent.mode = %v, want %v", m, tc.want)
			}
			wantHash := tc.wantHash
			if wantHash == "" {
				wantHash = "h1"
			}
			if h := got.GetNodes()[0].GetSettingsHash(); h != wantHash {
				t.Errorf("settings_hash = %q, want %q", h, wantHash)
			}
			if agent.GetMode() != iptables || agent.GetSettingsHash() != "h1" || before.GetNodes()[0].GetAgent().GetMode() != iptables {
				t.Error("an earlier answer or the stream's Node was changed in place")
			}
		})
	}
}

// fakeAPIWatch is an API watch in the middle of an outage.
type fakeAPIWatch struct {
	since time.Time
	res   []apistatus.Status
}

func (f fakeAPIWatch) Snapshot() []apistatus.Status { return f.res }
func (f fakeAPIWatch) Outage() time.Time            { return f.since }

// TestAPIWatchReported: ListNodes says views may be stale, since when and
// why per resource; GetNodeView flags its view.
func TestAPIWatchReported(t *testing.T) {
	c, f := setup(t)
	since := f.now.Add(-time.Minute)
	api := fakeAPIWatch{since: since, res: []apistatus.Status{
		{Resource: "endpointslices", State: apistatus.Unavailable, Since: since, LastError: "connection refused", Errors: 7},
		{Resource: "services", State: apistatus.Available, Errors: 2},
	}}
	_, cl := servertest.ServeAdmin(t, admin.New(c, api, nil))
	resp, err := cl.ListNodes(t.Context(), &switchyardv1.ListNodesRequest{})
	if err != nil {
		t.Fatal(err)
	}
	want := &switchyardv1.ApiWatchStatus{
		ViewsMayBeStale: true, UnavailableSince: timestamppb.New(since),
		Resources: []*switchyardv1.ApiResourceStatus{
			{Resource: "endpointslices", State: "unavailable", UnavailableSince: timestamppb.New(since), LastError: "connection refused", Errors: 7},
			{Resource: "services", State: "available", Errors: 2},
		},
	}
	if d := cmp.Diff(want, resp.GetApi(), protocmp.Transform()); d != "" {
		t.Errorf("ListNodes api (-want +got):\n%s", d)
	}
	nv, err := cl.GetNodeView(t.Context(), &switchyardv1.GetNodeViewRequest{NodeName: "node-a"})
	if err != nil {
		t.Fatal(err)
	}
	if !nv.GetViewsMayBeStale() {
		t.Error("GetNodeView during an outage: views_may_be_stale false")
	}
	// Without an API watch (nil), nothing is claimed either way.
	if resp, err := serve(t, c).ListNodes(t.Context(), &switchyardv1.ListNodesRequest{}); err != nil || resp.GetApi() != nil {
		t.Errorf("ListNodes without an API watch: api = %v, %v; want none", resp.GetApi(), err)
	}
}
