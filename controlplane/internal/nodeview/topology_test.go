package nodeview

import (
	"testing"

	"github.com/switchyard-proxy/switchyard/controlplane/internal/model"
	switchyardv1 "github.com/switchyard-proxy/switchyard/proto/switchyard/v1"
)

// topoNodes: zones a, b and c, and a node without zone.
func topoNodes() map[string]*model.Node { return nodesOf("n1@a", "n2@b", "n3@c", "n4") }

// hintedSlices: one endpoint per zone a and b, each hinted to its zone,
// plus extra endpoints.
func hintedSlices(extra ...model.Endpoint) []*model.EndpointSlice {
	eps := append([]model.Endpoint{
		newEP("10.0.0.1", "n1", "a", zones("a")),
		newEP("10.0.0.2", "n2", "b", zones("b")),
	}, extra...)
	return []*model.EndpointSlice{newSlice("web", "web-a", httpPort, eps...)}
}

// bothZones: what hintedSlices gives when hints do not apply.
func bothZones() []*switchyardv1.Endpoint {
	return eps(
		wantEP("10.0.0.1", "n1", "a", pt("http", 8080)),
		wantEP("10.0.0.2", "n2", "b", pt("http", 8080)),
	)
}

// TestZoneHints: zone hints (forZones), all-or-nothing.
func TestZoneHints(t *testing.T) {
	runSelectCases(t, []selectCase{{
		name:        "zone hints on every endpoint: node's zone only",
		svc:         newSvc("web"),
		slices:      hintedSlices(),
		nodes:       topoNodes(),
		at:          "n1",
		wantCluster: eps(wantEP("10.0.0.1", "n1", "a", pt("http", 8080))),
	}, {
		name:   "one ready endpoint without hints: all endpoints",
		svc:    newSvc("web"),
		slices: hintedSlices(newEP("10.0.0.3", "n3", "c")),
		nodes:  topoNodes(),
		at:     "n1",
		wantCluster: eps(
			wantEP("10.0.0.1", "n1", "a", pt("http", 8080)),
			wantEP("10.0.0.2", "n2", "b", pt("http", 8080)),
			wantEP("10.0.0.3", "n3", "c", pt("http", 8080)),
		),
	}, {
		name:        "a non-ready endpoint without hints does not disable hints",
		svc:         newSvc("web"),
		slices:      hintedSlices(newEP("10.0.0.3", "n3", "c", notReady)),
		nodes:       topoNodes(),
		at:          "n1",
		wantCluster: eps(wantEP("10.0.0.1", "n1", "a", pt("http", 8080))),
	}, {
		name:        "node's zone named by no hint: all endpoints",
		svc:         newSvc("web"),
		slices:      hintedSlices(),
		nodes:       topoNodes(),
		at:          "n3",
		wantCluster: bothZones(),
	}, {
		name:        "node without zone: all endpoints",
		svc:         newSvc("web"),
		slices:      hintedSlices(),
		nodes:       topoNodes(),
		at:          "n4",
		wantCluster: bothZones(),
	}, {
		name:   "an endpoint may be hinted to several zones",
		svc:    newSvc("web"),
		slices: hintedSlices(newEP("10.0.0.3", "n3", "c", zones("a", "c"))),
		nodes:  topoNodes(),
		at:     "n1",
		wantCluster: eps(
			wantEP("10.0.0.1", "n1", "a", pt("http", 8080)),
			wantEP("10.0.0.3", "n3", "c", pt("http", 8080)),
		),
	}, {
		name:        "zone hinted only by a terminating endpoint is not hinted",
		svc:         newSvc("web"),
		slices:      hintedSlices(newEP("10.0.0.3", "n3", "c", zones("c"), servingTerminating)),
		nodes:       topoNodes(),
		at:          "n3",
		wantCluster: bothZones(),
	}, {
		name: "no ready endpoint: terminating fallback ignores hints",
		svc:  newSvc("web"),
		slices: []*model.EndpointSlice{newSlice("web", "web-a", httpPort,
			newEP("10.0.0.1", "n1", "a", zones("a"), servingTerminating),
			newEP("10.0.0.2", "n2", "b", zones("b"), servingTerminating))},
		nodes: topoNodes(),
		at:    "n1",
		wantCluster: eps(
			wantEP("10.0.0.1", "n1", "a", pt("http", 8080), wantTerminating),
			wantEP("10.0.0.2", "n2", "b", pt("http", 8080), wantTerminating),
		)}})
}

// TestNodeHints: node hints (forNodes, PreferSameNode).
func TestNodeHints(t *testing.T) {
	runSelectCases(t, []selectCase{{
		name: "node hints on every endpoint: this node's endpoints",
		svc:  newSvc("web", withDistribution(model.DistributionPreferSameNode)),
		slices: []*model.EndpointSlice{newSlice("web", "web-a", httpPort,
			newEP("10.0.0.1", "n1", "a", zones("a"), forNodes("n1")),
			newEP("10.0.0.2", "n2", "a", zones("a"), forNodes("n2")))},
		nodes:       nodesOf("n1@a", "n2@a"),
		at:          "n2",
		wantCluster: eps(wantEP("10.0.0.2", "n2", "a", pt("http", 8080))),
	}, {
		name: "node named by no node hint falls back to zone hints",
		svc:  newSvc("web", withDistribution(model.DistributionPreferSameNode)),
		slices: []*model.EndpointSlice{newSlice("web", "web-a", httpPort,
			newEP("10.0.0.1", "n1", "a", zones("a"), forNodes("n1")),
			newEP("10.0.0.2", "n2", "b", zones("b"), forNodes("n2")))},
		nodes:       nodesOf("n1@a", "n2@b", "n5@a"),
		at:          "n5",
		wantCluster: eps(wantEP("10.0.0.1", "n1", "a", pt("http", 8080))),
	}, {
		name: "node hints missing on one endpoint: zone hints apply",
		svc:  newSvc("web"),
		slices: []*model.EndpointSlice{newSlice("web", "web-a", httpPort,
			newEP("10.0.0.1", "n1", "a", zones("a"), forNodes("n1")),
			newEP("10.0.0.2", "n2", "a", zones("a")),
			newEP("10.0.0.3", "n3", "b", zones("b"), forNodes("n3")))},
		nodes: nodesOf("n1@a", "n2@a", "n3@b"),
		at:    "n1",
		wantCluster: eps(
			wantEP("10.0.0.1", "n1", "a", pt("http", 8080)),
			wantEP("10.0.0.2", "n2", "a", pt("http", 8080)),
		)}})
}

// TestTrafficDistribution: spec.trafficDistribution: only hints matter, as upstream.
func TestTrafficDistribution(t *testing.T) {
	runSelectCases(t, []selectCase{{
		name:        "trafficDistribution PreferClose without hints: all endpoints",
		svc:         newSvc("web", withDistribution(model.DistributionPreferClose)),
		slices:      []*model.EndpointSlice{newSlice("web", "web-a", httpPort, newEP("10.0.0.1", "n1", "a"), newEP("10.0.0.2", "n2", "b"))},
		nodes:       topoNodes(),
		at:          "n1",
		wantCluster: bothZones(),
	}, {
		name:        "trafficDistribution PreferSameZone with zone hints",
		svc:         newSvc("web", withDistribution(model.DistributionPreferSameZone)),
		slices:      hintedSlices(),
		nodes:       topoNodes(),
		at:          "n2",
		wantCluster: eps(wantEP("10.0.0.2", "n2", "b", pt("http", 8080))),
	}, {
		name:        "hints are honoured without trafficDistribution (topology-mode annotation era)",
		svc:         newSvc("web"),
		slices:      hintedSlices(),
		nodes:       topoNodes(),
		at:          "n2",
		wantCluster: eps(wantEP("10.0.0.2", "n2", "b", pt("http", 8080)))}})
}

// TestTopologyWithPolicies: topology next to Local policies and per port.
func TestTopologyWithPolicies(t *testing.T) {
	runSelectCases(t, []selectCase{{
		name:   "ITP Local ClusterIP: no cluster set, and hints never filter the local set",
		svc:    newSvc("web", withITPLocal()),
		slices: hintedSlices(newEP("10.0.0.3", "n1", "a", zones("b"))),
		nodes:  topoNodes(),
		at:     "n1",
		wantLocal: eps(
			wantEP("10.0.0.1", "n1", "a", pt("http", 8080), isLocal),
			wantEP("10.0.0.3", "n1", "a", pt("http", 8080), isLocal),
		),
	}, {
		name:        "ETP Local: hints filter the cluster set, not the local set",
		svc:         newSvc("web", withETPLocal(32000)),
		slices:      hintedSlices(newEP("10.0.0.3", "n1", "a", zones("b"))),
		nodes:       topoNodes(),
		at:          "n1",
		wantCluster: eps(wantEP("10.0.0.1", "n1", "a", pt("http", 8080), isLocal)),
		wantLocal: eps(
			wantEP("10.0.0.1", "n1", "a", pt("http", 8080), isLocal),
			wantEP("10.0.0.3", "n1", "a", pt("http", 8080), isLocal),
		),
	}, {
		name: "topology is decided per port",
		svc:  newSvc("web", withPorts(tcp("http", 80), tcp("metrics", 9100))),
		slices: []*model.EndpointSlice{
			newSlice("web", "web-a", httpPort,
				newEP("10.0.0.1", "n1", "a", zones("a")), newEP("10.0.0.2", "n2", "b", zones("b"))),
			newSlice("web", "web-m", []model.EndpointPort{slicePort("metrics", 9100)},
				newEP("10.0.0.1", "n1", "a"), newEP("10.0.0.2", "n2", "b")),
		},
		nodes: topoNodes(),
		at:    "n1",
		wantCluster: eps(
			wantEP("10.0.0.1", "n1", "a", pt("http", 8080), pt("metrics", 9100)),
			wantEP("10.0.0.2", "n2", "b", pt("metrics", 9100)),
		),
	}})
}
