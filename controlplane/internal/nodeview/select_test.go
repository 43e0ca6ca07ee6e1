package nodeview

import (
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/protobuf/testing/protocmp"

	"github.com/switchyard-proxy/switchyard/controlplane/internal/model"
	switchyardv1 "github.com/switchyard-proxy/switchyard/proto/switchyard/v1"
)

// selectCase is one endpoint-selection case: the view at node `at` (empty
// for the default view of an unnamed node).
type selectCase struct {
	name        string
	svc         *model.Service
	slices      []*model.EndpointSlice
	nodes       map[string]*model.Node
	at          string
	wantCluster []*switchyardv1.Endpoint
	wantLocal   []*switchyardv1.Endpoint
	// wantNoneAnywhere: has_any_endpoints must be false, the view's and
	// every port's. Most cases have a usable endpoint somewhere, so true
	// is the default expectation.
	wantNoneAnywhere bool
	// wantPortsWithout: the ports whose has_any_endpoints must be false
	// while the view's is true.
	wantPortsWithout []string
}

func runSelectCases(t *testing.T, cases []selectCase) {
	t.Helper()
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			views := Service(tc.svc, slicesOf(tc.slices...), tc.nodes)
			var node *model.Node
			if tc.at != "" {
				node = tc.nodes[tc.at]
				if node == nil {
					node = &model.Node{Name: tc.at}
				}
			}
			got := mustView(t, views.For(node))
			if diff := cmp.Diff(tc.wantCluster, got.GetClusterEndpoints(), protocmp.Transform()); diff != "" {
				t.Errorf("cluster endpoints (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.wantLocal, got.GetLocalEndpoints(), protocmp.Transform()); diff != "" {
				t.Errorf("local endpoints (-want +got):\n%s", diff)
			}
			if got.GetHasAnyEndpoints() != !tc.wantNoneAnywhere {
				t.Errorf("has_any_endpoints = %v, want %v", got.GetHasAnyEndpoints(), !tc.wantNoneAnywhere)
			}
			for _, p := range got.GetPorts() {
				want := !tc.wantNoneAnywhere && !slices.Contains(tc.wantPortsWithout, p.GetName())
				if p.HasAnyEndpoints == nil || p.GetHasAnyEndpoints() != want {
					t.Errorf("port %q has_any_endpoints = %v, want %v (always set)", p.GetName(), p.HasAnyEndpoints, want)
				}
			}
		})
	}
}

var httpPort = []model.EndpointPort{slicePort("http", 8080)}

// TestMerge: which slices are merged.
func TestMerge(t *testing.T) {
	runSelectCases(t, []selectCase{{
		name:   "one slice, all ready, sorted by address",
		svc:    newSvc("web"),
		slices: []*model.EndpointSlice{newSlice("web", "web-a", httpPort, newEP("10.0.0.2", "n2", "a"), newEP("10.0.0.1", "n1", "a"))},
		wantCluster: eps(
			wantEP("10.0.0.1", "n1", "a", pt("http", 8080)),
			wantEP("10.0.0.2", "n2", "a", pt("http", 8080)),
		),
	}, {
		name:             "no slices: empty cluster set",
		svc:              newSvc("web"),
		wantNoneAnywhere: true,
	}, {
		name:             "nothing ready or serving: empty cluster set",
		svc:              newSvc("web"),
		slices:           []*model.EndpointSlice{newSlice("web", "web-a", httpPort, newEP("10.0.0.1", "n1", "", notReady), newEP("10.0.0.2", "n1", "", deadTerminating))},
		wantNoneAnywhere: true,
	}, {
		name: "slice of another family is ignored",
		svc:  newSvc("web"),
		slices: []*model.EndpointSlice{
			newSlice("web", "web-v4", httpPort, newEP("10.0.0.1", "n1", "")),
			newSlice("web", "web-v6", httpPort, newEP("fd00::1", "n1", "")),
		},
		wantCluster: eps(wantEP("10.0.0.1", "n1", "", pt("http", 8080))),
	}, {
		name: "IPv6-only service uses only IPv6 slices",
		svc:  newSvc("web", withClusterIPs("fd00:96::10")),
		slices: []*model.EndpointSlice{
			newSlice("web", "web-v4", httpPort, newEP("10.0.0.1", "n1", "")),
			newSlice("web", "web-v6", httpPort, newEP("fd00::1", "n1", "")),
		},
		wantCluster: eps(wantEP("fd00::1", "n1", "", pt("http", 8080))),
	}, {
		name: "dual-stack service merges both families, IPv4 first",
		svc:  newSvc("web", withClusterIPs("fd00:96::10", "10.96.0.10")),
		slices: []*model.EndpointSlice{
			newSlice("web", "web-v6", httpPort, newEP("fd00::1", "n1", "")),
			newSlice("web", "web-v4", httpPort, newEP("10.0.0.1", "n1", "")),
		},
		wantCluster: eps(
			wantEP("10.0.0.1", "n1", "", pt("http", 8080)),
			wantEP("fd00::1", "n1", "", pt("http", 8080)),
		),
	}, {
		name: "slice of another service is ignored",
		svc:  newSvc("web"),
		slices: []*model.EndpointSlice{
			newSlice("web", "web-a", httpPort, newEP("10.0.0.1", "n1", "")),
			newSlice("api", "api-a", httpPort, newEP("10.0.0.9", "n1", "")),
		},
		wantCluster: eps(wantEP("10.0.0.1", "n1", "", pt("http", 8080)))}})
}

// TestDedup: one entry per address and target port (kube-proxy's
// endpoint identity, "ip:port"), chosen deterministically.
func TestDedup(t *testing.T) {
	runSelectCases(t, []selectCase{{
		name: "duplicate ready address and port: first slice by name wins",
		svc:  newSvc("web"),
		slices: []*model.EndpointSlice{
			newSlice("web", "web-b", httpPort, newEP("10.0.0.1", "n2", "z2")),
			newSlice("web", "web-a", httpPort, newEP("10.0.0.1", "n1", "z1")),
		},
		wantCluster: eps(wantEP("10.0.0.1", "n1", "z1", pt("http", 8080))),
	}, {
		name: "one address, two target ports for one service port: two endpoints",
		svc:  newSvc("web"),
		slices: []*model.EndpointSlice{
			newSlice("web", "web-b", []model.EndpointPort{slicePort("http", 9090)}, newEP("10.0.0.1", "n2", "z2")),
			newSlice("web", "web-a", httpPort, newEP("10.0.0.1", "n1", "z1")),
		},
		wantCluster: eps(
			wantEP("10.0.0.1", "n1", "z1", pt("http", 8080)),
			wantEP("10.0.0.1", "n2", "z2", pt("http", 9090)),
		),
	}, {
		name: "a second target port for one of two ports: a message per choice, lowest ports first",
		svc:  newSvc("web", withPorts(tcp("http", 80), tcp("metrics", 9100))),
		slices: []*model.EndpointSlice{
			newSlice("web", "web-a", []model.EndpointPort{slicePort("http", 8081), slicePort("metrics", 9100)}, newEP("10.0.0.1", "n1", "")),
			newSlice("web", "web-b", []model.EndpointPort{slicePort("http", 8080)}, newEP("10.0.0.1", "n2", "")),
		},
		wantCluster: eps(
			wantEP("10.0.0.1", "n2", "", pt("http", 8080), pt("metrics", 9100)),
			wantEP("10.0.0.1", "n1", "", pt("http", 8081)),
		),
	}, {
		name: "duplicate address: non-terminating beats terminating, whatever the slice order",
		svc:  newSvc("web"),
		slices: []*model.EndpointSlice{
			newSlice("web", "web-a", httpPort, newEP("10.0.0.1", "old", "", servingTerminating)),
			newSlice("web", "web-b", httpPort, newEP("10.0.0.1", "new", "")),
		},
		wantCluster: eps(wantEP("10.0.0.1", "new", "", pt("http", 8080))),
	}, {
		name: "duplicate address: a starting pod beats a terminating one (upstream rule)",
		svc:  newSvc("web"),
		slices: []*model.EndpointSlice{
			newSlice("web", "web-a", httpPort, newEP("10.0.0.1", "old", "", servingTerminating)),
			newSlice("web", "web-b", httpPort, newEP("10.0.0.1", "new", "", notReady)),
		},
		wantNoneAnywhere: true,
	}, {
		name: "duplicate address: ready beats not ready",
		svc:  newSvc("web"),
		slices: []*model.EndpointSlice{
			newSlice("web", "web-a", httpPort, newEP("10.0.0.1", "n1", "", notReady)),
			newSlice("web", "web-b", httpPort, newEP("10.0.0.1", "n2", "")),
		},
		wantCluster: eps(wantEP("10.0.0.1", "n2", "", pt("http", 8080))),
	}, {
		name: "duplicate within one slice: first wins",
		svc:  newSvc("web"),
		slices: []*model.EndpointSlice{
			newSlice("web", "web-a", httpPort, newEP("10.0.0.1", "n1", ""), newEP("10.0.0.1", "n2", "")),
		},
		wantCluster: eps(wantEP("10.0.0.1", "n1", "", pt("http", 8080))),
	}})
}

func TestPorts(t *testing.T) {
	twoPorts := withPorts(tcp("http", 80), tcp("metrics", 9100))
	runSelectCases(t, []selectCase{{
		name: "named target port resolves per slice",
		svc:  newSvc("web"),
		slices: []*model.EndpointSlice{
			newSlice("web", "web-a", []model.EndpointPort{slicePort("http", 8080)}, newEP("10.0.0.1", "n1", "")),
			newSlice("web", "web-b", []model.EndpointPort{slicePort("http", 8443)}, newEP("10.0.0.2", "n1", "")),
		},
		wantCluster: eps(
			wantEP("10.0.0.1", "n1", "", pt("http", 8080)),
			wantEP("10.0.0.2", "n1", "", pt("http", 8443)),
		),
	}, {
		name: "endpoint serves only the ports its slice lists",
		svc:  newSvc("web", twoPorts),
		slices: []*model.EndpointSlice{
			newSlice("web", "web-a", []model.EndpointPort{slicePort("http", 8080)}, newEP("10.0.0.1", "n1", "")),
			newSlice("web", "web-b", []model.EndpointPort{slicePort("metrics", 9100), slicePort("http", 8080)}, newEP("10.0.0.2", "n1", "")),
		},
		wantCluster: eps(
			wantEP("10.0.0.1", "n1", "", pt("http", 8080)),
			wantEP("10.0.0.2", "n1", "", pt("http", 8080), pt("metrics", 9100)),
		),
	}, {
		name: "ports of an endpoint are sorted by name",
		svc:  newSvc("web", withPorts(tcp("zeta", 1), tcp("alpha", 2))),
		slices: []*model.EndpointSlice{
			newSlice("web", "web-a", []model.EndpointPort{slicePort("zeta", 11), slicePort("alpha", 12)}, newEP("10.0.0.1", "n1", "")),
		},
		wantCluster: eps(wantEP("10.0.0.1", "n1", "", pt("alpha", 12), pt("zeta", 11))),
	}, {
		name: "slice port of another protocol does not serve the service port",
		svc:  newSvc("web"),
		slices: []*model.EndpointSlice{
			newSlice("web", "web-a", []model.EndpointPort{{Name: "http", Protocol: model.ProtocolUDP, Port: 8080}}, newEP("10.0.0.1", "n1", "")),
		},
		wantNoneAnywhere: true,
	}, {
		name: "unnamed single port",
		svc:  newSvc("web", withPorts(tcp("", 80))),
		slices: []*model.EndpointSlice{
			newSlice("web", "web-a", []model.EndpointPort{slicePort("", 8080)}, newEP("10.0.0.1", "n1", "")),
		},
		wantCluster: eps(wantEP("10.0.0.1", "n1", "", pt("", 8080))),
	}, {
		name: "fallback is decided per port: terminating for one, ready for the other",
		svc:  newSvc("web", twoPorts),
		slices: []*model.EndpointSlice{
			newSlice("web", "web-a", []model.EndpointPort{slicePort("http", 8080), slicePort("metrics", 9100)}, newEP("10.0.0.1", "n1", "", servingTerminating)),
			newSlice("web", "web-b", []model.EndpointPort{slicePort("http", 8080)}, newEP("10.0.0.2", "n1", "")),
		},
		wantCluster: eps(
			wantEP("10.0.0.1", "n1", "", pt("metrics", 9100), wantTerminating),
			wantEP("10.0.0.2", "n1", "", pt("http", 8080)),
		),
	}})
}

func TestReadinessFallback(t *testing.T) {
	runSelectCases(t, []selectCase{{
		name: "ready endpoints only when any is ready",
		svc:  newSvc("web"),
		slices: []*model.EndpointSlice{newSlice("web", "web-a", httpPort,
			newEP("10.0.0.1", "n1", ""), newEP("10.0.0.2", "n1", "", servingTerminating), newEP("10.0.0.3", "n1", "", notReady))},
		wantCluster: eps(wantEP("10.0.0.1", "n1", "", pt("http", 8080))),
	}, {
		name: "no ready endpoint: serving-terminating ones are used",
		svc:  newSvc("web"),
		slices: []*model.EndpointSlice{newSlice("web", "web-a", httpPort,
			newEP("10.0.0.1", "n1", "", servingTerminating), newEP("10.0.0.2", "n1", "", deadTerminating), newEP("10.0.0.3", "n1", "", notReady))},
		wantCluster: eps(wantEP("10.0.0.1", "n1", "", pt("http", 8080), wantTerminating)),
	}, {
		name: "ETP Local: local set falls back on its own while cluster set stays ready",
		svc:  newSvc("web", withETPLocal(0)),
		slices: []*model.EndpointSlice{newSlice("web", "web-a", httpPort,
			newEP("10.0.0.1", "n1", "", servingTerminating), newEP("10.0.0.2", "n2", ""))},
		nodes: nodesOf("n1", "n2"),
		at:    "n1",
		wantCluster: eps(
			wantEP("10.0.0.2", "n2", "", pt("http", 8080)),
		),
		wantLocal: eps(wantEP("10.0.0.1", "n1", "", pt("http", 8080), wantTerminating, isLocal)),
	}, {
		name: "ETP Local: both sets fall back when nothing is ready anywhere",
		svc:  newSvc("web", withETPLocal(0)),
		slices: []*model.EndpointSlice{newSlice("web", "web-a", httpPort,
			newEP("10.0.0.1", "n1", "", servingTerminating), newEP("10.0.0.2", "n2", "", servingTerminating))},
		nodes: nodesOf("n1", "n2"),
		at:    "n1",
		wantCluster: eps(
			wantEP("10.0.0.1", "n1", "", pt("http", 8080), wantTerminating, isLocal),
			wantEP("10.0.0.2", "n2", "", pt("http", 8080), wantTerminating),
		),
		wantLocal: eps(wantEP("10.0.0.1", "n1", "", pt("http", 8080), wantTerminating, isLocal)),
	}, {
		name: "ETP Local: local ready excludes local terminating",
		svc:  newSvc("web", withETPLocal(0)),
		slices: []*model.EndpointSlice{newSlice("web", "web-a", httpPort,
			newEP("10.0.0.1", "n1", ""), newEP("10.0.0.2", "n1", "", servingTerminating))},
		nodes: nodesOf("n1"),
		at:    "n1",
		wantCluster: eps(
			wantEP("10.0.0.1", "n1", "", pt("http", 8080), isLocal),
		),
		wantLocal: eps(wantEP("10.0.0.1", "n1", "", pt("http", 8080), isLocal)),
	}})
}

// TestInternalTrafficPolicyLocal: ClusterIP traffic to local endpoints
// only. A ClusterIP service is not externally reachable, so it has no
// cluster set, although the model's external policy is Cluster.
func TestInternalTrafficPolicyLocal(t *testing.T) {
	runSelectCases(t, []selectCase{{
		name:      "hosting node: local set only, no cluster set",
		svc:       newSvc("web", withITPLocal()),
		slices:    twoZones(),
		nodes:     nodesOf("n1@a", "n2@b", "n3@a"),
		at:        "n1",
		wantLocal: eps(wantEP("10.0.0.1", "n1", "a", pt("http", 8080), isLocal)),
	}, {
		name:   "node without endpoints: nothing, but endpoints exist elsewhere",
		svc:    newSvc("web", withITPLocal()),
		slices: twoZones(),
		nodes:  nodesOf("n1@a", "n2@b", "n3@a"),
		at:     "n3",
	}, {
		name:      "local serving-terminating used though ready ones exist elsewhere",
		svc:       newSvc("web", withITPLocal()),
		slices:    twoZones(servingTerminating),
		nodes:     nodesOf("n1@a", "n2@b"),
		at:        "n1",
		wantLocal: eps(wantEP("10.0.0.1", "n1", "a", pt("http", 8080), wantTerminating, isLocal)),
	}, {
		name:   "default view (unnamed node) has no endpoints",
		svc:    newSvc("web", withITPLocal()),
		slices: twoZones(),
	}, {
		name:             "nothing usable anywhere: has_any_endpoints false",
		svc:              newSvc("web", withITPLocal()),
		slices:           []*model.EndpointSlice{newSlice("web", "web-a", httpPort, newEP("10.0.0.1", "n1", "a", notReady), newEP("10.0.0.2", "n2", "b", deadTerminating))},
		nodes:            nodesOf("n1@a", "n2@b"),
		at:               "n1",
		wantNoneAnywhere: true,
	}, {
		name:   "external IPs make it reachable: cluster set for external traffic",
		svc:    newSvc("web", withITPLocal(), withExternalIPs("192.0.2.1")),
		slices: twoZones(),
		nodes:  nodesOf("n1@a", "n2@b"),
		at:     "n1",
		wantCluster: eps(
			wantEP("10.0.0.1", "n1", "a", pt("http", 8080), isLocal),
			wantEP("10.0.0.2", "n2", "b", pt("http", 8080)),
		),
		wantLocal: eps(wantEP("10.0.0.1", "n1", "a", pt("http", 8080), isLocal)),
	}})
}

// TestExternalTrafficPolicyLocal: a local set for external traffic, the
// cluster set for internal traffic.
func TestExternalTrafficPolicyLocal(t *testing.T) {
	runSelectCases(t, []selectCase{{
		name:   "hosting node gets its endpoints as the local set",
		svc:    newSvc("web", withETPLocal(32000)),
		slices: twoZones(),
		nodes:  nodesOf("n1@a", "n2@b"),
		at:     "n2",
		wantCluster: eps(
			wantEP("10.0.0.1", "n1", "a", pt("http", 8080)),
			wantEP("10.0.0.2", "n2", "b", pt("http", 8080), isLocal),
		),
		wantLocal: eps(wantEP("10.0.0.2", "n2", "b", pt("http", 8080), isLocal)),
	}, {
		name:   "node without endpoints: empty local set, endpoints exist elsewhere",
		svc:    newSvc("web", withETPLocal(32000)),
		slices: twoZones(),
		nodes:  nodesOf("n1@a", "n2@b", "n3@a"),
		at:     "n3",
		wantCluster: eps(
			wantEP("10.0.0.1", "n1", "a", pt("http", 8080)),
			wantEP("10.0.0.2", "n2", "b", pt("http", 8080)),
		),
	}, {
		name:   "NodePort service",
		svc:    newSvc("web", withNodePort(), withETPLocalPolicy()),
		slices: twoZones(),
		nodes:  nodesOf("n1@a", "n2@b"),
		at:     "n1",
		wantCluster: eps(
			wantEP("10.0.0.1", "n1", "a", pt("http", 8080), isLocal),
			wantEP("10.0.0.2", "n2", "b", pt("http", 8080)),
		),
		wantLocal: eps(wantEP("10.0.0.1", "n1", "a", pt("http", 8080), isLocal)),
	}, {
		name:   "endpoint without node name is never local",
		svc:    newSvc("web", withETPLocal(32000)),
		slices: []*model.EndpointSlice{newSlice("web", "web-a", httpPort, newEP("10.0.0.1", "", ""))},
		wantCluster: eps(
			wantEP("10.0.0.1", "", "", pt("http", 8080)),
		),
	}, {
		name:   "node unknown to the state still gets its local endpoints",
		svc:    newSvc("web", withETPLocal(32000)),
		slices: twoZones(),
		nodes:  nodesOf("n1@a"),
		at:     "n2",
		wantCluster: eps(
			wantEP("10.0.0.1", "n1", "a", pt("http", 8080)),
			wantEP("10.0.0.2", "n2", "b", pt("http", 8080), isLocal),
		),
		wantLocal: eps(wantEP("10.0.0.2", "n2", "b", pt("http", 8080), isLocal)),
	}, {
		name:   "LoadBalancer with no node port nor address yet: no external traffic, no local set",
		svc:    newSvc("web", withType(model.TypeLoadBalancer), withETPLocalPolicy()),
		slices: twoZones(),
		nodes:  nodesOf("n1@a", "n2@b"),
		at:     "n1",
		wantCluster: eps(
			wantEP("10.0.0.1", "n1", "a", pt("http", 8080)),
			wantEP("10.0.0.2", "n2", "b", pt("http", 8080)),
		),
	}, {
		name:             "nothing usable anywhere: has_any_endpoints false",
		svc:              newSvc("web", withETPLocal(32000)),
		slices:           []*model.EndpointSlice{newSlice("web", "web-a", httpPort, newEP("10.0.0.1", "n1", "a", notReady))},
		nodes:            nodesOf("n1@a"),
		at:               "n1",
		wantNoneAnywhere: true,
	}})
}

// TestBothPoliciesLocal: every kind of traffic goes to local endpoints,
// so there is no cluster set (switchyard.v1 contract; see policies).
func TestBothPoliciesLocal(t *testing.T) {
	// Externally reachable, so upstream's UsesClusterEndpoints holds: the
	// cluster set is filled (for short-circuiting traffic to external
	// addresses from inside the cluster) even though both policies are Local.
	runSelectCases(t, []selectCase{{
		name:   "hosting node: every endpoint in the cluster set, its own in the local set",
		svc:    newSvc("web", withETPLocal(32000), withITPLocal()),
		slices: twoZones(),
		nodes:  nodesOf("n1@a", "n2@b"),
		at:     "n2",
		wantCluster: eps(
			wantEP("10.0.0.1", "n1", "a", pt("http", 8080)),
			wantEP("10.0.0.2", "n2", "b", pt("http", 8080), isLocal),
		),
		wantLocal: eps(wantEP("10.0.0.2", "n2", "b", pt("http", 8080), isLocal)),
	}, {
		name:   "node without endpoints: cluster set only, endpoints exist elsewhere",
		svc:    newSvc("web", withNodePort(), withETPLocalPolicy(), withITPLocal()),
		slices: twoZones(),
		nodes:  nodesOf("n1@a", "n2@b", "n3@a"),
		at:     "n3",
		wantCluster: eps(
			wantEP("10.0.0.1", "n1", "a", pt("http", 8080)),
			wantEP("10.0.0.2", "n2", "b", pt("http", 8080)),
		),
	}, {
		name:        "local set falls back to serving-terminating on its own",
		svc:         newSvc("web", withETPLocal(32000), withITPLocal()),
		slices:      twoZones(servingTerminating),
		nodes:       nodesOf("n1@a", "n2@b"),
		at:          "n1",
		wantCluster: eps(wantEP("10.0.0.2", "n2", "b", pt("http", 8080))),
		wantLocal:   eps(wantEP("10.0.0.1", "n1", "a", pt("http", 8080), wantTerminating, isLocal)),
	}})
}

// TestInternalLocalExternalCluster: a NodePort service with internal
// policy Local and external policy Cluster: external traffic goes to every
// endpoint (topology applied), cluster-IP traffic to local ones.
func TestInternalLocalExternalCluster(t *testing.T) {
	svc := func() *model.Service { return newSvc("web", withNodePort(), withITPLocal()) }
	runSelectCases(t, []selectCase{{
		name:   "hosting node: every endpoint in the cluster set, its own in the local set",
		svc:    svc(),
		slices: twoZones(),
		nodes:  nodesOf("n1@a", "n2@b", "n3@a"),
		at:     "n1",
		wantCluster: eps(
			wantEP("10.0.0.1", "n1", "a", pt("http", 8080), isLocal),
			wantEP("10.0.0.2", "n2", "b", pt("http", 8080)),
		),
		wantLocal: eps(wantEP("10.0.0.1", "n1", "a", pt("http", 8080), isLocal)),
	}, {
		name:   "node without endpoints: cluster set, empty local set",
		svc:    svc(),
		slices: twoZones(),
		nodes:  nodesOf("n1@a", "n2@b", "n3@a"),
		at:     "n3",
		wantCluster: eps(
			wantEP("10.0.0.1", "n1", "a", pt("http", 8080)),
			wantEP("10.0.0.2", "n2", "b", pt("http", 8080)),
		),
	}, {
		name:        "zone hints filter the cluster set, not the local set",
		svc:         svc(),
		slices:      hintedSlices(newEP("10.0.0.3", "n1", "a", zones("b"))),
		nodes:       topoNodes(),
		at:          "n1",
		wantCluster: eps(wantEP("10.0.0.1", "n1", "a", pt("http", 8080), isLocal)),
		wantLocal: eps(
			wantEP("10.0.0.1", "n1", "a", pt("http", 8080), isLocal),
			wantEP("10.0.0.3", "n1", "a", pt("http", 8080), isLocal),
		),
	}, {
		name:   "zone hints for a node without endpoints",
		svc:    svc(),
		slices: hintedSlices(newEP("10.0.0.3", "n1", "a", zones("b"))),
		nodes:  topoNodes(),
		at:     "n2",
		wantCluster: eps(
			wantEP("10.0.0.2", "n2", "b", pt("http", 8080), isLocal),
			wantEP("10.0.0.3", "n1", "a", pt("http", 8080)),
		),
		wantLocal: eps(wantEP("10.0.0.2", "n2", "b", pt("http", 8080), isLocal)),
	}, {
		name: "serving-terminating only: both sets fall back",
		svc:  svc(),
		slices: []*model.EndpointSlice{newSlice("web", "web-a", httpPort,
			newEP("10.0.0.1", "n1", "a", servingTerminating), newEP("10.0.0.2", "n2", "b", servingTerminating))},
		nodes: nodesOf("n1@a", "n2@b"),
		at:    "n1",
		wantCluster: eps(
			wantEP("10.0.0.1", "n1", "a", pt("http", 8080), wantTerminating, isLocal),
			wantEP("10.0.0.2", "n2", "b", pt("http", 8080), wantTerminating),
		),
		wantLocal: eps(wantEP("10.0.0.1", "n1", "a", pt("http", 8080), wantTerminating, isLocal)),
	}, {
		name:             "nothing usable anywhere: has_any_endpoints false",
		svc:              svc(),
		slices:           []*model.EndpointSlice{newSlice("web", "web-a", httpPort, newEP("10.0.0.1", "n1", "a", deadTerminating))},
		nodes:            nodesOf("n1@a"),
		at:               "n1",
		wantNoneAnywhere: true,
	}})
}

// TestHasAnyEndpoints: has_any_endpoints is one bit per service port
// (the view's is their OR), the same in every variant of its view.
func TestHasAnyEndpoints(t *testing.T) {
	twoPorts := withPorts(tcp("http", 80), tcp("metrics", 9100))
	runSelectCases(t, []selectCase{{
		name:   "only serving-terminating endpoints count",
		svc:    newSvc("web", withITPLocal()),
		slices: []*model.EndpointSlice{newSlice("web", "web-a", httpPort, newEP("10.0.0.1", "n1", "a", servingTerminating))},
		nodes:  nodesOf("n1@a", "n2@b"),
		at:     "n2",
	}, {
		name: "decided per port: a port no slice names has none while the other has one",
		svc:  newSvc("web", twoPorts),
		slices: []*model.EndpointSlice{
			newSlice("web", "web-a", []model.EndpointPort{slicePort("metrics", 9100)}, newEP("10.0.0.1", "n1", "")),
		},
		wantCluster:      eps(wantEP("10.0.0.1", "n1", "", pt("metrics", 9100))),
		wantPortsWithout: []string{"http"},
	}, {
		name: "per port on a node without local endpoints: elsewhere counts, nothing usable does not",
		svc:  newSvc("web", twoPorts, withITPLocal()),
		slices: []*model.EndpointSlice{
			newSlice("web", "web-a", []model.EndpointPort{slicePort("http", 8080)}, newEP("10.0.0.1", "n1", "a")),
			newSlice("web", "web-b", []model.EndpointPort{slicePort("metrics", 9100)}, newEP("10.0.0.2", "n1", "a", notReady)),
		},
		nodes:            nodesOf("n1@a", "n2@b"),
		at:               "n2",
		wantPortsWithout: []string{"metrics"},
	}, {
		name: "endpoints of a slice that serves no service port do not count",
		svc:  newSvc("web"),
		slices: []*model.EndpointSlice{
			newSlice("web", "web-a", []model.EndpointPort{slicePort("other", 1)}, newEP("10.0.0.1", "n1", "")),
		},
		wantNoneAnywhere: true,
	}})
}

// twoZones: endpoints on n1 (zone a) and n2 (zone b); opts apply to the
// first.
func twoZones(opts ...epOpt) []*model.EndpointSlice {
	return []*model.EndpointSlice{newSlice("web", "web-a", httpPort,
		newEP("10.0.0.1", "n1", "a", opts...), newEP("10.0.0.2", "n2", "b"))}
}
