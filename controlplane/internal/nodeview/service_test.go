package nodeview

import (
	"slices"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/testing/protocmp"

	"github.com/switchyard-proxy/switchyard/controlplane/internal/model"
	switchyardv1 "github.com/switchyard-proxy/switchyard/proto/switchyard/v1"
)

// TestServiceViewAllFields converts a service that sets every field.
func TestServiceViewAllFields(t *testing.T) {
	t0 := time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC)
	svc := &model.Service{
		Key:                      model.ServiceKey{Namespace: "shop", Name: "front"},
		Type:                     model.TypeLoadBalancer,
		ClusterIPs:               addrs("10.96.0.5", "fd00:96::5"),
		ExternalIPs:              addrs("192.0.2.10"),
		LoadBalancerIPs:          addrs("198.51.100.7"),
		LoadBalancerSourceRanges: prefixes("203.0.113.0/24"),
		Ports: []model.ServicePort{
			{Name: "https", Protocol: model.ProtocolTCP, Port: 443, NodePort: 30443},
			{Name: "dns", Protocol: model.ProtocolUDP, Port: 53, NodePort: 30053},
			{Name: "sig", Protocol: model.ProtocolSCTP, Port: 9, NodePort: 30009},
		},
		AffinityTimeoutSeconds: 600,
		ExternalPolicy:         model.PolicyLocal,
		InternalPolicy:         model.PolicyCluster,
		HealthCheckNodePort:    31000,
	}
	slice := func(name, owner string, trigger time.Time) *model.EndpointSlice {
		s := newSlice(owner, name, nil)
		s.Key.Namespace, s.Service.Namespace = "shop", "shop"
		s.TriggerTime = trigger
		return s
	}
	bySlice := slicesOf(
		slice("front-b", "front", t0),
		slice("front-a", "front", t0.Add(time.Minute)),
		slice("other", "elsewhere", t0.Add(time.Hour)), // not this service's: ignored
	)
	want := &switchyardv1.ServiceView{
		Namespace:                "shop",
		Name:                     "front",
		Type:                     switchyardv1.ServiceType_SERVICE_TYPE_LOAD_BALANCER,
		ClusterIps:               []string{"10.96.0.5", "fd00:96::5"},
		ExternalIps:              []string{"192.0.2.10"},
		LoadBalancerIps:          []string{"198.51.100.7"},
		LoadBalancerSourceRanges: []string{"203.0.113.0/24"},
		Ports: []*switchyardv1.ServicePort{
			{Name: "https", Protocol: switchyardv1.Protocol_PROTOCOL_TCP, Port: 443, NodePort: 30443, HasAnyEndpoints: proto.Bool(false)},
			{Name: "dns", Protocol: switchyardv1.Protocol_PROTOCOL_UDP, Port: 53, NodePort: 30053, HasAnyEndpoints: proto.Bool(false)},
			{Name: "sig", Protocol: switchyardv1.Protocol_PROTOCOL_SCTP, Port: 9, NodePort: 30009, HasAnyEndpoints: proto.Bool(false)},
		},
		SessionAffinity:               switchyardv1.SessionAffinity_SESSION_AFFINITY_CLIENT_IP,
		SessionAffinityTimeoutSeconds: 600,
		ExternalTrafficPolicy:         switchyardv1.TrafficPolicy_TRAFFIC_POLICY_LOCAL,
		InternalTrafficPolicy:         switchyardv1.TrafficPolicy_TRAFFIC_POLICY_CLUSTER,
		HealthCheckNodePort:           31000,
		// No trigger time: it travels per change beside the view
		// (fleetlatency), not in the content versions hash.
	}
	v := Service(svc, bySlice, nil).Default
	if diff := cmp.Diff(want, serviceOf(t, v), protocmp.Transform()); diff != "" {
		t.Errorf("view (-want +got):\n%s", diff)
	}
	if v.Name != "shop/front" {
		t.Errorf("Name = %q, want shop/front", v.Name)
	}
}

// plainView is the view of newSvc("web") with no endpoints, edited by f.
func plainView(f func(*switchyardv1.ServiceView)) *switchyardv1.ServiceView {
	sv := &switchyardv1.ServiceView{
		Namespace:  "ns",
		Name:       "web",
		Type:       switchyardv1.ServiceType_SERVICE_TYPE_CLUSTER_IP,
		ClusterIps: []string{"10.96.0.10"},
		Ports: []*switchyardv1.ServicePort{{Name: "http", Protocol: switchyardv1.Protocol_PROTOCOL_TCP, Port: 80,
			HasAnyEndpoints: proto.Bool(false)}},
		SessionAffinity:       switchyardv1.SessionAffinity_SESSION_AFFINITY_NONE,
		ExternalTrafficPolicy: switchyardv1.TrafficPolicy_TRAFFIC_POLICY_CLUSTER,
		InternalTrafficPolicy: switchyardv1.TrafficPolicy_TRAFFIC_POLICY_CLUSTER,
	}
	if f != nil {
		f(sv)
	}
	return sv
}

func TestServiceViewFields(t *testing.T) {
	tests := []struct {
		name string
		svc  *model.Service
		want *switchyardv1.ServiceView
	}{{
		name: "plain ClusterIP",
		svc:  newSvc("web"),
		want: plainView(nil),
	}, {
		name: "NodePort with ETP Local carries no health-check port",
		svc:  newSvc("web", withETPLocal(31000), withType(model.TypeNodePort)),
		want: plainView(func(sv *switchyardv1.ServiceView) {
			sv.Type = switchyardv1.ServiceType_SERVICE_TYPE_NODE_PORT
			sv.Ports[0].NodePort = 30080
			sv.ExternalTrafficPolicy = switchyardv1.TrafficPolicy_TRAFFIC_POLICY_LOCAL
		}),
	}, {
		name: "LoadBalancer with ETP Local carries its health-check port",
		svc:  newSvc("web", withETPLocal(31000)),
		want: plainView(func(sv *switchyardv1.ServiceView) {
			sv.Type = switchyardv1.ServiceType_SERVICE_TYPE_LOAD_BALANCER
			sv.Ports[0].NodePort = 30080
			sv.ExternalTrafficPolicy = switchyardv1.TrafficPolicy_TRAFFIC_POLICY_LOCAL
			sv.HealthCheckNodePort = 31000
		}),
	}, {
		name: "LoadBalancer with ETP Cluster carries no health-check port",
		svc: newSvc("web", withType(model.TypeLoadBalancer), func(s *model.Service) {
			s.HealthCheckNodePort = 31000
		}),
		want: plainView(func(sv *switchyardv1.ServiceView) {
			sv.Type = switchyardv1.ServiceType_SERVICE_TYPE_LOAD_BALANCER
		}),
	}, {
		name: "ITP Local",
		svc:  newSvc("web", withITPLocal()),
		want: plainView(func(sv *switchyardv1.ServiceView) {
			sv.InternalTrafficPolicy = switchyardv1.TrafficPolicy_TRAFFIC_POLICY_LOCAL
		}),
	}, {
		name: "invalid UTF-8 is replaced, never fails the encoding",
		svc: newSvc("web", withPorts(model.ServicePort{Name: "a\xffb", Protocol: model.ProtocolTCP, Port: 1}), func(s *model.Service) {
			s.Key.Name = "w\xfe"
		}),
		want: plainView(func(sv *switchyardv1.ServiceView) {
			sv.Name = "w\uFFFD"
			sv.Ports = []*switchyardv1.ServicePort{{Name: "a\uFFFDb", Protocol: switchyardv1.Protocol_PROTOCOL_TCP, Port: 1,
				HasAnyEndpoints: proto.Bool(false)}}
		}),
	}}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			v := Service(tc.svc, nil, nil).Default
			if diff := cmp.Diff(tc.want, serviceOf(t, v), protocmp.Transform()); diff != "" {
				t.Errorf("view (-want +got):\n%s", diff)
			}
			if v.Name != tc.want.Namespace+"/"+tc.want.Name {
				t.Errorf("Name = %q, want %q", v.Name, tc.want.Namespace+"/"+tc.want.Name)
			}
		})
	}
}

// shape summarises a ServiceViews: which zones and nodes have their own
// view, and the nodes consulted.
type shape struct {
	Zones []string
	Nodes []string
	Read  []string
}

func shapeOf(s *ServiceViews) shape {
	var sh shape
	for z := range s.ByZone {
		sh.Zones = append(sh.Zones, z)
	}
	for n := range s.ByNode {
		sh.Nodes = append(sh.Nodes, n)
	}
	slices.Sort(sh.Zones)
	slices.Sort(sh.Nodes)
	sh.Read = s.Nodes
	return sh
}

func TestServiceVariants(t *testing.T) {
	nodes := nodesOf("n1@a", "n2@b", "n3@a", "n4@c")
	spread := []*model.EndpointSlice{newSlice("web", "web-a", httpPort,
		newEP("10.0.0.1", "n1", "a"), newEP("10.0.0.2", "n2", "b"), newEP("10.0.0.3", "n4", "c", notReady))}
	zoneHinted := []*model.EndpointSlice{newSlice("web", "web-a", httpPort,
		newEP("10.0.0.1", "n1", "a", zones("a")), newEP("10.0.0.2", "n2", "b", zones("b", "c")))}
	nodeHinted := []*model.EndpointSlice{newSlice("web", "web-a", httpPort,
		newEP("10.0.0.1", "n1", "a", forNodes("n1")), newEP("10.0.0.2", "n2", "b", forNodes("n2", "n9")))}
	everyNodeHinted := []*model.EndpointSlice{newSlice("web", "web-a", httpPort,
		newEP("10.0.0.1", "n1", "a", forNodes("n1", "n2")), newEP("10.0.0.2", "n2", "b", forNodes("n1", "n2")))}
	tests := []struct {
		name   string
		svc    *model.Service
		slices []*model.EndpointSlice
		want   shape
	}{
		{name: "no policy, no hints: one shared view", svc: newSvc("web"), slices: spread},
		{name: "no endpoints at all", svc: newSvc("web", withETPLocal(1))},
		{
			name: "ETP Local: a view per hosting node with usable endpoints",
			svc:  newSvc("web", withETPLocal(1)), slices: spread,
			want: shape{Nodes: []string{"n1", "n2"}, Read: []string{"n1", "n2"}},
		},
		{
			name: "ITP Local: a view per hosting node",
			svc:  newSvc("web", withITPLocal()), slices: spread,
			want: shape{Nodes: []string{"n1", "n2"}, Read: []string{"n1", "n2"}},
		},
		{
			name: "zone hints: a view per hinted zone that differs from all endpoints",
			svc:  newSvc("web"), slices: zoneHinted,
			want: shape{Zones: []string{"a", "b", "c"}},
		},
		{
			name: "node hints: a view per hinted node, known or not",
			svc:  newSvc("web"), slices: nodeHinted,
			want: shape{Nodes: []string{"n1", "n2", "n9"}, Read: []string{"n1", "n2", "n9"}},
		},
		{
			name: "node hints naming every endpoint give no override",
			svc:  newSvc("web"), slices: everyNodeHinted,
			want: shape{Read: []string{"n1", "n2"}},
		},
		{
			name: "ITP Local with zone hints: hints unused, no zone views",
			svc:  newSvc("web", withITPLocal()), slices: zoneHinted,
			want: shape{Nodes: []string{"n1", "n2"}, Read: []string{"n1", "n2"}},
		},
		{
			name: "ITP Local ClusterIP with node hints: hinted nodes are not read",
			svc:  newSvc("web", withITPLocal()), slices: nodeHinted,
			want: shape{Nodes: []string{"n1", "n2"}, Read: []string{"n1", "n2"}},
		},
		{
			name: "ITP Local, ETP Cluster NodePort with zone hints: zone views and node views",
			svc:  newSvc("web", withNodePort(), withITPLocal()), slices: zoneHinted,
			want: shape{Zones: []string{"a", "b", "c"}, Nodes: []string{"n1", "n2"}, Read: []string{"n1", "n2"}},
		},
		{
			// Reachable from outside, so it has a cluster set (upstream's
			// UsesClusterEndpoints) and that set follows the zone hints.
			name: "both Local with zone hints: zone views and node views",
			svc:  newSvc("web", withETPLocal(1), withITPLocal()), slices: zoneHinted,
			want: shape{Zones: []string{"a", "b", "c"}, Nodes: []string{"n1", "n2"}, Read: []string{"n1", "n2"}},
		},
		{
			name: "ETP Local with zone hints: zone views and node views",
			svc:  newSvc("web", withETPLocal(1)), slices: zoneHinted,
			want: shape{Zones: []string{"a", "b", "c"}, Nodes: []string{"n1", "n2"}, Read: []string{"n1", "n2"}},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := Service(tc.svc, slicesOf(tc.slices...), nodes)
			if diff := cmp.Diff(tc.want, shapeOf(got)); diff != "" {
				t.Errorf("shape (-want +got):\n%s", diff)
			}
		})
	}
}

func TestServiceViewsFor(t *testing.T) {
	nodes := nodesOf("n1@a", "n2@b", "n3@a", "n4@c", "n5")
	sv := Service(newSvc("web", withETPLocal(1)), slicesOf(newSlice("web", "web-a", httpPort,
		newEP("10.0.0.1", "n1", "a", zones("a")), newEP("10.0.0.2", "n2", "b", zones("b")))), nodes)
	tests := []struct {
		name string
		node *model.Node
		want *View
	}{
		{name: "nil node", node: nil, want: sv.Default},
		{name: "unknown node", node: &model.Node{Name: "nx"}, want: sv.Default},
		{name: "node without zone", node: nodes["n5"], want: sv.Default},
		{name: "node in unhinted zone", node: nodes["n4"], want: sv.Default},
		{name: "node in hinted zone without endpoints", node: nodes["n3"], want: sv.ByZone["a"]},
		{name: "hosting node", node: nodes["n1"], want: sv.ByNode["n1"]},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if tc.want == nil {
				t.Fatal("test wants a nil view")
			}
			if got := sv.For(tc.node); got != tc.want {
				t.Errorf("For = %s@%s, want %s@%s", got.Name, got.Version, tc.want.Name, tc.want.Version)
			}
		})
	}
	// The hosting node's view was computed with its zone: its cluster set
	// follows zone a's hints.
	want := eps(wantEP("10.0.0.1", "n1", "a", pt("http", 8080), isLocal))
	if diff := cmp.Diff(want, serviceOf(t, sv.ByNode["n1"]).GetClusterEndpoints(), protocmp.Transform()); diff != "" {
		t.Errorf("n1 cluster endpoints (-want +got):\n%s", diff)
	}
	// Zones whose views are equal share one View.
	zs := Service(newSvc("web"), slicesOf(newSlice("web", "web-a", httpPort,
		newEP("10.0.0.1", "n1", "a", zones("a")), newEP("10.0.0.2", "n2", "b", zones("b", "c")))), nodes)
	if zs.ByZone["b"] == nil || zs.ByZone["b"] != zs.ByZone["c"] {
		t.Errorf("zones b and c do not share one view: %p %p", zs.ByZone["b"], zs.ByZone["c"])
	}
	if got := Service(nil, nil, nil); got != nil {
		t.Errorf("Service(nil) = %v, want nil", got)
	}
}
