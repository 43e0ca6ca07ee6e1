package scenario_test

import (
	"net/netip"
	"slices"
	"testing"

	"github.com/switchyard-proxy/switchyard/dataplane"
	"github.com/switchyard-proxy/switchyard/dataplane/dataplanetest"
	"github.com/switchyard-proxy/switchyard/dataplane/explain"
	"github.com/switchyard-proxy/switchyard/dataplane/internal/sorted"
	"github.com/switchyard-proxy/switchyard/dataplane/scenario"
	switchyardv1 "github.com/switchyard-proxy/switchyard/proto/switchyard/v1"
)

// TestTracerSyncsAsTheAgent checks the sync options every mode's driver
// relies on: a full first sync, then partial ones whose Changed names
// exactly the services added, updated and removed.
func TestTracerSyncsAsTheAgent(t *testing.T) {
	sc, err := scenario.Parse("s", []byte(`node: {nodeName: a, nodeIps: [10.200.0.10, bad]}
steps:
- set: [{namespace: d, name: x}, {namespace: d, name: "y"}]
- set: [{namespace: d, name: "y", clusterIps: [10.96.0.1]}, {namespace: d, name: z}]
  delete: [d/x]
- set: [{namespace: d, name: z}]
`))
	if err != nil {
		t.Fatal(err)
	}
	fake := dataplanetest.New("iptables")
	var seen [][]netip.Addr
	tr := scenario.NewTracer(fake, func(_ explain.Packet, nodeIPs []netip.Addr) (explain.Verdict, error) {
		seen = append(seen, nodeIPs)
		return explain.Verdict{Action: explain.Pass}, nil
	})
	checked := 0
	tr.Check = func(testing.TB, *dataplane.State, dataplane.ApplyOptions) { checked++ }
	for i := range sc.Steps {
		tr.Apply(t, sc.State(i))
	}
	want := [][]string{nil, {"d/x", "d/y", "d/z"}, {}}
	for i, c := range fake.Calls() {
		if c.Opts.Full != (i == 0) {
			t.Errorf("sync %d: Full %v", i, c.Opts.Full)
		}
		got := sorted.Keys(c.Opts.Changed)
		if i > 0 && (c.Opts.Changed == nil || !slices.Equal(got, want[i])) {
			t.Errorf("sync %d: Changed %v, want %v", i, got, want[i])
		}
	}
	if checked != len(sc.Steps) {
		t.Errorf("Check ran %d times, want %d", checked, len(sc.Steps))
	}
	tr.Trace(t, explain.Packet{Protocol: dataplane.TCP, Src: netip.MustParseAddr("10.0.0.1"), Dst: netip.MustParseAddr("10.0.0.2"), Port: 80})
	if tr.Mode() != "iptables" || len(seen) != 1 || !slices.Equal(seen[0], []netip.Addr{netip.MustParseAddr("10.200.0.10")}) {
		t.Errorf("mode %s, traced with node IPs %v", tr.Mode(), seen)
	}
}

// TestIPv6Mirrors checks that a mode under IPv6 sees only IPv6 (prefixes
// 96 bits longer) and that verdicts come back in the scenario's IPv4.
func TestIPv6Mirrors(t *testing.T) {
	fake := dataplanetest.New("ipvs")
	var traced explain.Packet
	six := scenario.IPv6(scenario.NewTracer(fake, func(pkt explain.Packet, _ []netip.Addr) (explain.Verdict, error) {
		traced = pkt
		ep := netip.AddrPortFrom(netip.MustParseAddr("fd00::a00:2"), 8080)
		return explain.Verdict{Action: explain.Forward, Endpoints: explain.Even(ep)}, nil
	}))
	st := &dataplane.State{
		Config: &switchyardv1.NodeConfig{NodeIps: []string{"10.200.0.10"}, ClusterCidrs: []string{"10.244.0.0/16"}},
		Services: map[string]*switchyardv1.ServiceView{"d/x": {Namespace: "d", Name: "x", ClusterIps: []string{"10.96.0.1"},
			ClusterEndpoints: []*switchyardv1.Endpoint{{Address: "10.0.0.2"}}}},
	}
	six.Apply(t, st)
	got := fake.Applied()
	if cfg := got.Config; cfg.GetNodeIps()[0] != "fd00::ac8:a" || cfg.GetClusterCidrs()[0] != "fd00::af4:0/112" {
		t.Errorf("node config not moved: %v", cfg)
	}
	if sv := got.Services["d/x"]; sv.GetClusterIps()[0] != "fd00::a60:1" || sv.GetClusterEndpoints()[0].GetAddress() != "fd00::a00:2" {
		t.Errorf("service not moved: %v", sv)
	}
	if st.Config.GetNodeIps()[0] != "10.200.0.10" {
		t.Errorf("the scenario's state changed: %v", st.Config)
	}
	v := six.Trace(t, explain.Packet{Protocol: dataplane.TCP, Src: netip.MustParseAddr("10.244.0.5"), Dst: netip.MustParseAddr("10.96.0.1"), Port: 80})
	if traced.Src != netip.MustParseAddr("fd00::af4:5") || traced.Dst != netip.MustParseAddr("fd00::a60:1") {
		t.Errorf("traced %s", traced)
	}
	if len(v.Endpoints) != 1 || v.Endpoints[0].Endpoint != netip.MustParseAddrPort("10.0.0.2:8080") {
		t.Errorf("verdict not moved back: %s", v)
	}
}
