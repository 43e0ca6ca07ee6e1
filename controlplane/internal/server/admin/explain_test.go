package admin_test

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/testing/protocmp"

	"github.com/switchyard-proxy/switchyard/controlplane/internal/cache/cachetest"
	"github.com/switchyard-proxy/switchyard/controlplane/internal/server/servertest"
	switchyardv1 "github.com/switchyard-proxy/switchyard/proto/switchyard/v1"
)

func TestExplain(t *testing.T) {
	c, f := setup(t)
	// node-c: a service with two endpoints, never acknowledged.
	web := servertest.ServedService("shop", "front", "10.96.0.40", 80, "10.244.1.2", "10.244.2.2")
	cfg := cachetest.NodeConfig("node-c", "zone-3")
	cfg.GetNodeConfig().NodeIps = []string{"10.200.0.12"}
	cfg.GetNodeConfig().ClusterCidrs = []string{"10.244.0.0/16"}
	cView := cachetest.NewNodeView(cachetest.MustView(t, cfg), cachetest.MustView(t, web))
	c.Publish("node-c", cView, nil)
	iptables := switchyardv1.DataplaneMode_DATAPLANE_MODE_IPTABLES
	nftables := switchyardv1.DataplaneMode_DATAPLANE_MODE_NFTABLES

	cases := []struct {
		name string
		req  *switchyardv1.ExplainRequest
		want *switchyardv1.ExplainResponse
	}{{
		name: "acked view: web without endpoints at port 80 is rejected",
		req:  &switchyardv1.ExplainRequest{NodeName: "node-a", SourceIp: "10.244.0.5", DestinationIp: "10.96.0.10", DestinationPort: 80},
		want: &switchyardv1.ExplainResponse{Action: switchyardv1.ExplainAction_EXPLAIN_ACTION_REJECT,
			Service: "default/web", Address: "cluster IP", Reason: "no-endpoints",
			Summary: "reject by default/web cluster IP (no-endpoints)", Version: f.a1.Version(), Mode: iptables, Applied: true},
	}, {
		name: "desired view: web moved to 8080, so 80 is no service's",
		req: &switchyardv1.ExplainRequest{NodeName: "node-a", SourceIp: "10.244.0.5", DestinationIp: "10.96.0.10",
			DestinationPort: 80, Desired: true},
		want: &switchyardv1.ExplainResponse{Action: switchyardv1.ExplainAction_EXPLAIN_ACTION_PASS,
			Reason: "not-a-service", Summary: "pass (not-a-service)", Version: f.a2.Version(), Mode: iptables,
			Notes: []string{"this is the desired view: the node has not acknowledged it yet"}},
	}, {
		name: "the mode asked for: nftables rejects a cluster IP's unserved port",
		req: &switchyardv1.ExplainRequest{NodeName: "node-a", Protocol: "udp", SourceIp: "10.244.0.5", DestinationIp: "10.96.0.20",
			DestinationPort: 5432, Mode: nftables},
		want: &switchyardv1.ExplainResponse{Action: switchyardv1.ExplainAction_EXPLAIN_ACTION_REJECT,
			Reason: "unserved-port", Summary: "reject (unserved-port)", Version: f.a1.Version(), Mode: nftables, Applied: true},
	}, {
		name: "forwarded from the node itself: shares and masquerade",
		req:  &switchyardv1.ExplainRequest{NodeName: "node-c", SourceIp: "10.200.0.12", DestinationIp: "10.96.0.40", DestinationPort: 80},
		want: &switchyardv1.ExplainResponse{Action: switchyardv1.ExplainAction_EXPLAIN_ACTION_FORWARD,
			Endpoints: []*switchyardv1.EndpointShare{
				{Address: "10.244.1.2", Port: 8080, Share: 0.5}, {Address: "10.244.2.2", Port: 8080, Share: 0.5}},
			Masquerade: true, Service: "shop/front", PortName: "http", Address: "cluster IP", Reason: "endpoints",
			Summary: "forward to [10.244.1.2:8080 50.0%, 10.244.2.2:8080 50.0%] masqueraded by shop/front:http cluster IP (endpoints)",
			Version: cView.Version(), Mode: iptables,
			Notes: []string{"this is the desired view: the node has not acknowledged it yet"}},
	}}
	client := serve(t, c)
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := client.Explain(t.Context(), tc.req)
			if err != nil {
				t.Fatal(err)
			}
			if d := cmp.Diff(tc.want, got, protocmp.Transform()); d != "" {
				t.Errorf("Explain (-want +got):\n%s", d)
			}
		})
	}
}

func TestExplainErrors(t *testing.T) {
	c, _ := setup(t)
	client := serve(t, c)
	for _, tc := range []struct {
		name string
		req  *switchyardv1.ExplainRequest
		code codes.Code
	}{
		{"no node", &switchyardv1.ExplainRequest{SourceIp: "10.0.0.1", DestinationIp: "10.96.0.10", DestinationPort: 80}, codes.InvalidArgument},
		{"bad source", &switchyardv1.ExplainRequest{NodeName: "node-a", SourceIp: "pod", DestinationIp: "10.96.0.10", DestinationPort: 80}, codes.InvalidArgument},
		{"mixed families", &switchyardv1.ExplainRequest{NodeName: "node-a", SourceIp: "fd00::1", DestinationIp: "10.96.0.10", DestinationPort: 80}, codes.InvalidArgument},
		{"bad protocol", &switchyardv1.ExplainRequest{NodeName: "node-a", Protocol: "icmp", SourceIp: "10.0.0.1", DestinationIp: "10.96.0.10", DestinationPort: 80}, codes.InvalidArgument},
		{"port 0", &switchyardv1.ExplainRequest{NodeName: "node-a", SourceIp: "10.0.0.1", DestinationIp: "10.96.0.10"}, codes.InvalidArgument},
		{"unknown node", &switchyardv1.ExplainRequest{NodeName: "node-z", SourceIp: "10.0.0.1", DestinationIp: "10.96.0.10", DestinationPort: 80}, codes.NotFound},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := client.Explain(t.Context(), tc.req)
			if status.Code(err) != tc.code {
				t.Errorf("Explain: %v, want code %v", err, tc.code)
			}
		})
	}
}
