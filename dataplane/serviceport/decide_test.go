package serviceport_test

import (
	"net/netip"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"google.golang.org/protobuf/proto"

	"github.com/switchyard-proxy/switchyard/dataplane"
	"github.com/switchyard-proxy/switchyard/dataplane/serviceport"
	switchyardv1 "github.com/switchyard-proxy/switchyard/proto/switchyard/v1"
)

// decision is what TestDecide compares of one read port.
type decision struct {
	Internal, External      serviceport.Traffic
	ShortCircuit            bool
	UsesLocal, UsesExternal bool
}

func decisionOf(p *serviceport.Port) decision {
	return decision{Internal: p.Internal, External: p.External, ShortCircuit: p.ShortCircuit,
		UsesLocal: p.UsesLocal(), UsesExternal: p.UsesExternal()}
}

// TestDecide has one case per rule of the shared decision (decide.go),
// read through Read as every mode reads it. Each view has ports "http"
// (endpoints as the case says) and "metrics", which no endpoint lists.
func TestDecide(t *testing.T) {
	const (
		cluster = switchyardv1.TrafficPolicy_TRAFFIC_POLICY_CLUSTER
		local   = switchyardv1.TrafficPolicy_TRAFFIC_POLICY_LOCAL
	)
	remote := serviceport.Endpoint{Addr: netip.MustParseAddrPort("10.244.1.2:8080")}
	mine := serviceport.Endpoint{Addr: netip.MustParseAddrPort("10.244.0.2:8080")}
	ep := func(e serviceport.Endpoint) *switchyardv1.Endpoint {
		return &switchyardv1.Endpoint{Address: e.Addr.Addr().String(), Ready: true, Serving: true,
			Ports: []*switchyardv1.EndpointPort{{Name: "http", Port: uint32(e.Addr.Port())}}}
	}
	// view: a NodePort service (node ports 30080, 30081) with both
	// policies Cluster, one remote endpoint for http, and the per-port
	// answers a current control plane sends.
	view := func() *switchyardv1.ServiceView {
		return &switchyardv1.ServiceView{
			Namespace: "ns", Name: "web", ClusterIps: []string{"10.96.0.1"},
			Ports: []*switchyardv1.ServicePort{
				{Name: "http", Protocol: switchyardv1.Protocol_PROTOCOL_TCP, Port: 80, NodePort: 30080, HasAnyEndpoints: proto.Bool(true)},
				{Name: "metrics", Protocol: switchyardv1.Protocol_PROTOCOL_TCP, Port: 9100, NodePort: 30081, HasAnyEndpoints: proto.Bool(false)},
			},
			InternalTrafficPolicy: cluster, ExternalTrafficPolicy: cluster,
			ClusterEndpoints: []*switchyardv1.Endpoint{ep(remote)},
			HasAnyEndpoints:  true,
		}
	}
	eps := func(e ...serviceport.Endpoint) []serviceport.Endpoint { return e }
	// served: http under Cluster policies, on its remote endpoint.
	served := decision{
		Internal:     serviceport.Traffic{Endpoints: eps(remote), NoEndpoints: serviceport.Drop},
		External:     serviceport.Traffic{Endpoints: eps(remote), NoEndpoints: serviceport.Drop},
		UsesExternal: true,
	}
	// refused: a port no endpoint serves anywhere.
	refused := decision{
		Internal: serviceport.Traffic{NoEndpoints: serviceport.Reject},
		External: serviceport.Traffic{NoEndpoints: serviceport.Reject},
	}
	type decideCase struct {
		name          string
		edit          func(*switchyardv1.ServiceView)
		http, metrics decision
	}
	cases := []decideCase{{
		name:    "cluster policies: both traffics use the cluster set; a port without endpoints rejects while the other serves",
		http:    served,
		metrics: refused,
	}, {
		name:    "no node port, external or load-balancer IP: no external traffic",
		edit:    func(sv *switchyardv1.ServiceView) { sv.Ports[0].NodePort, sv.Ports[1].NodePort = 0, 0 },
		http:    decision{Internal: serviceport.Traffic{Endpoints: eps(remote), NoEndpoints: serviceport.Drop}},
		metrics: decision{Internal: serviceport.Traffic{NoEndpoints: serviceport.Reject}},
	}, {
		name: "ITP Local with a local endpoint: internal traffic uses the local set",
		edit: func(sv *switchyardv1.ServiceView) {
			sv.InternalTrafficPolicy = local
			sv.LocalEndpoints = []*switchyardv1.Endpoint{ep(mine)}
		},
		http: decision{
			Internal:     serviceport.Traffic{Endpoints: eps(mine), Local: true, NoEndpoints: serviceport.Drop},
			External:     serviceport.Traffic{Endpoints: eps(remote), NoEndpoints: serviceport.Drop},
			UsesLocal:    true,
			UsesExternal: true,
		},
		metrics: decision{
			Internal: serviceport.Traffic{Local: true, NoEndpoints: serviceport.Reject},
			External: serviceport.Traffic{NoEndpoints: serviceport.Reject},
		},
	}, {
		name: "ITP Local without a local endpoint: endpoints elsewhere, internal traffic dropped",
		edit: func(sv *switchyardv1.ServiceView) {
			sv.InternalTrafficPolicy = local
			sv.Ports[0].NodePort, sv.Ports[1].NodePort = 0, 0
		},
		http:    decision{Internal: serviceport.Traffic{Local: true, NoEndpoints: serviceport.Drop}},
		metrics: decision{Internal: serviceport.Traffic{Local: true, NoEndpoints: serviceport.Reject}},
	}, {
		name: "ETP Local with a local endpoint: external traffic uses it, node and pod traffic short-circuits",
		edit: func(sv *switchyardv1.ServiceView) {
			sv.ExternalTrafficPolicy = local
			sv.ClusterEndpoints = append(sv.ClusterEndpoints, ep(mine))
			sv.LocalEndpoints = []*switchyardv1.Endpoint{ep(mine)}
		},
		http: decision{
			Internal:     serviceport.Traffic{Endpoints: eps(mine, remote), NoEndpoints: serviceport.Drop},
			External:     serviceport.Traffic{Endpoints: eps(mine), Local: true, NoEndpoints: serviceport.Drop},
			ShortCircuit: true, UsesLocal: true, UsesExternal: true,
		},
		metrics: decision{
			Internal: serviceport.Traffic{NoEndpoints: serviceport.Reject},
			External: serviceport.Traffic{Local: true, NoEndpoints: serviceport.Reject},
		},
	}, {
		name: "ETP Local without a local endpoint: external traffic dropped, short-circuit kept",
		edit: func(sv *switchyardv1.ServiceView) { sv.ExternalTrafficPolicy = local },
		http: decision{
			Internal:     serviceport.Traffic{Endpoints: eps(remote), NoEndpoints: serviceport.Drop},
			External:     serviceport.Traffic{Local: true, NoEndpoints: serviceport.Drop},
			ShortCircuit: true, UsesExternal: true,
		},
		metrics: decision{
			Internal: serviceport.Traffic{NoEndpoints: serviceport.Reject},
			External: serviceport.Traffic{Local: true, NoEndpoints: serviceport.Reject},
		},
	}, {
		name: "both policies Local, no cluster set: nothing to short-circuit to",
		edit: func(sv *switchyardv1.ServiceView) {
			sv.InternalTrafficPolicy, sv.ExternalTrafficPolicy = local, local
			sv.ClusterEndpoints = nil
		},
		http: decision{
			Internal: serviceport.Traffic{Local: true, NoEndpoints: serviceport.Drop},
			External: serviceport.Traffic{Local: true, NoEndpoints: serviceport.Drop},
		},
		metrics: decision{
			Internal: serviceport.Traffic{Local: true, NoEndpoints: serviceport.Reject},
			External: serviceport.Traffic{Local: true, NoEndpoints: serviceport.Reject},
		},
	}, {
		name: "the per-port answer wins over the service-wide one, either way",
		edit: func(sv *switchyardv1.ServiceView) {
			sv.InternalTrafficPolicy = local
			sv.Ports[0].NodePort, sv.Ports[1].NodePort = 0, 0
			sv.HasAnyEndpoints = false
			sv.Ports[1].HasAnyEndpoints = proto.Bool(true)
		},
		http:    decision{Internal: serviceport.Traffic{Local: true, NoEndpoints: serviceport.Drop}},
		metrics: decision{Internal: serviceport.Traffic{Local: true, NoEndpoints: serviceport.Drop}},
	}, {
		name: "older control plane (no per-port answer): the service-wide one for every port",
		edit: func(sv *switchyardv1.ServiceView) {
			sv.Ports[0].HasAnyEndpoints, sv.Ports[1].HasAnyEndpoints = nil, nil
		},
		http: served,
		metrics: decision{
			Internal: serviceport.Traffic{NoEndpoints: serviceport.Drop},
			External: serviceport.Traffic{NoEndpoints: serviceport.Drop},
		},
	}, {
		name: "older control plane, no endpoint anywhere: every port rejects",
		edit: func(sv *switchyardv1.ServiceView) {
			sv.Ports[0].HasAnyEndpoints, sv.Ports[1].HasAnyEndpoints = nil, nil
			sv.ClusterEndpoints, sv.HasAnyEndpoints = nil, false
		},
		http:    refused,
		metrics: refused,
	}}
	for _, via := range []struct {
		name string
		set  func(*switchyardv1.ServiceView)
	}{
		{"an external IP", func(sv *switchyardv1.ServiceView) { sv.ExternalIps = []string{"192.0.2.7"} }},
		{"a load-balancer IP", func(sv *switchyardv1.ServiceView) { sv.LoadBalancerIps = []string{"203.0.113.5"} }},
	} {
		cases = append(cases, decideCase{
			name: via.name + " alone makes a port externally reachable",
			edit: func(sv *switchyardv1.ServiceView) {
				sv.Ports[0].NodePort, sv.Ports[1].NodePort = 0, 0
				via.set(sv)
			},
			http: served, metrics: refused,
		})
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			sv := view()
			if tc.edit != nil {
				tc.edit(sv)
			}
			svc, ok := serviceport.Read("ns/web", sv, dataplane.IPv4, func(s, r string) { t.Errorf("skip %s: %s", s, r) })
			if !ok || len(svc.Ports) != 2 {
				t.Fatalf("Read: ok=%v, %d ports", ok, len(svc.Ports))
			}
			opts := cmpopts.EquateComparable(netip.AddrPort{})
			if d := cmp.Diff(tc.http, decisionOf(&svc.Ports[0]), opts); d != "" {
				t.Errorf("http (-want +got):\n%s", d)
			}
			if d := cmp.Diff(tc.metrics, decisionOf(&svc.Ports[1]), opts); d != "" {
				t.Errorf("metrics (-want +got):\n%s", d)
			}
		})
	}
}

// TestEndpointIdentity: an endpoint is an address and a port, as in
// kube-proxy. One address on two target ports of one service port is two
// endpoints; the same address and port twice is one (the first wins).
func TestEndpointIdentity(t *testing.T) {
	ep := func(addr string, port uint32, term bool) *switchyardv1.Endpoint {
		return &switchyardv1.Endpoint{Address: addr, Terminating: term,
			Ports: []*switchyardv1.EndpointPort{{Name: "http", Port: port}}}
	}
	sv := &switchyardv1.ServiceView{
		Namespace: "ns", Name: "web", ClusterIps: []string{"10.96.0.1"},
		Ports: []*switchyardv1.ServicePort{{Name: "http", Protocol: switchyardv1.Protocol_PROTOCOL_TCP, Port: 80}},
		ClusterEndpoints: []*switchyardv1.Endpoint{
			ep("10.244.0.2", 8081, false), ep("10.244.0.2", 8080, false), ep("10.244.0.2", 8080, true),
		},
	}
	svc, _ := serviceport.Read("ns/web", sv, dataplane.IPv4, func(string, string) {})
	want := []serviceport.Endpoint{
		{Addr: netip.MustParseAddrPort("10.244.0.2:8080")},
		{Addr: netip.MustParseAddrPort("10.244.0.2:8081")},
	}
	if d := cmp.Diff(want, svc.Ports[0].Cluster, cmpopts.EquateComparable(netip.AddrPort{})); d != "" {
		t.Errorf("(-want +got):\n%s", d)
	}
}
