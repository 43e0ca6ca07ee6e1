package canary_test

import (
	"net/netip"
	"slices"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/testing/protocmp"

	"github.com/switchyard-proxy/switchyard/dataplane"
	"github.com/switchyard-proxy/switchyard/dataplane/explain"
	"github.com/switchyard-proxy/switchyard/dataplane/iptables"
	"github.com/switchyard-proxy/switchyard/dataplane/iptables/iptablestest"
	"github.com/switchyard-proxy/switchyard/dataplane/xtables"
	"github.com/switchyard-proxy/switchyard/nodeagent/internal/canary"
	switchyardv1 "github.com/switchyard-proxy/switchyard/proto/switchyard/v1"
)

const canaryPort = 10264

func newCanary(t *testing.T, vip string) *canary.Canary {
	t.Helper()
	c, err := canary.New(canary.Config{VIP: netip.MustParseAddrPort(vip), Port: canaryPort, Interval: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func nodeConfig(ips ...string) *switchyardv1.NodeConfig {
	return &switchyardv1.NodeConfig{NodeName: "node-a", NodeIps: ips, ClusterCidrs: []string{"10.244.0.0/16", "fd00:244::/64"}}
}

// wantService is the canary's service for a cluster IP, port and endpoint.
func wantService(ip string, port uint32, endpoint string) *switchyardv1.ServiceView {
	return &switchyardv1.ServiceView{
		Namespace: canary.Namespace, Name: canary.ServiceName, Type: switchyardv1.ServiceType_SERVICE_TYPE_CLUSTER_IP,
		ClusterIps:            []string{ip},
		Ports:                 []*switchyardv1.ServicePort{{Name: "canary", Protocol: switchyardv1.Protocol_PROTOCOL_TCP, Port: port, HasAnyEndpoints: proto.Bool(true)}},
		SessionAffinity:       switchyardv1.SessionAffinity_SESSION_AFFINITY_NONE,
		ExternalTrafficPolicy: switchyardv1.TrafficPolicy_TRAFFIC_POLICY_CLUSTER,
		InternalTrafficPolicy: switchyardv1.TrafficPolicy_TRAFFIC_POLICY_CLUSTER,
		ClusterEndpoints: []*switchyardv1.Endpoint{{Address: endpoint, Ports: []*switchyardv1.EndpointPort{{Name: "canary", Port: canaryPort}},
			Ready: true, Serving: true, NodeName: "node-a"}},
		HasAnyEndpoints: true,
	}
}

func TestDecorate(t *testing.T) {
	web := &switchyardv1.ServiceView{Namespace: "default", Name: "web", ClusterIps: []string{"10.96.0.10"}}
	thief := &switchyardv1.ServiceView{Namespace: "default", Name: "thief", ClusterIps: []string{"10.96.255.200"}}
	reservation := &switchyardv1.ServiceView{Namespace: canary.Namespace, Name: canary.ServiceName, ClusterIps: []string{"10.96.255.200"},
		Ports: []*switchyardv1.ServicePort{{Name: "canary", Protocol: switchyardv1.Protocol_PROTOCOL_TCP, Port: 80}}}
	tests := []struct {
		name     string
		vip      string
		cfg      *switchyardv1.NodeConfig
		services map[string]*switchyardv1.ServiceView
		want     *switchyardv1.ServiceView // nil: no canary
	}{
		{"IPv4, the node's first IPv4 address", "10.96.255.200:80", nodeConfig("fd00::10", "10.200.0.10", "10.200.0.11"),
			map[string]*switchyardv1.ServiceView{"default/web": web}, wantService("10.96.255.200", 80, "10.200.0.10")},
		{"IPv6", "[fd00:96::c8]:8080", nodeConfig("10.200.0.10", "fd00::10"),
			nil, wantService("fd00:96::c8", 8080, "fd00::10")},
		{"the reservation is replaced", "10.96.255.200:80", nodeConfig("10.200.0.10"),
			map[string]*switchyardv1.ServiceView{canary.Name: reservation}, wantService("10.96.255.200", 80, "10.200.0.10")},
		{"no node address of the family", "10.96.255.200:80", nodeConfig("fd00::10"),
			map[string]*switchyardv1.ServiceView{canary.Name: reservation}, nil},
		{"no NodeConfig yet", "10.96.255.200:80", nil, nil, nil},
		{"inside the Service ranges", "10.96.255.200:80",
			&switchyardv1.NodeConfig{NodeName: "node-a", NodeIps: []string{"10.200.0.10"}, ServiceCidrs: []string{"10.96.0.0/16", "fd00:96::/112"}},
			nil, wantService("10.96.255.200", 80, "10.200.0.10")},
		{"outside the Service ranges", "10.97.0.1:80",
			&switchyardv1.NodeConfig{NodeName: "node-a", NodeIps: []string{"10.200.0.10"}, ServiceCidrs: []string{"10.96.0.0/16", "fd00:96::/112"}},
			nil, nil},
		{"another Service has the cluster IP", "10.96.255.200:80", nodeConfig("10.200.0.10"),
			map[string]*switchyardv1.ServiceView{"default/thief": thief}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := newCanary(t, tt.vip)
			st := &dataplane.State{Config: tt.cfg, Services: map[string]*switchyardv1.ServiceView{}}
			for n, sv := range tt.services {
				st.Services[n] = sv
			}
			if owned := c.Decorate(st, nil); !cmp.Equal(owned, []string{canary.Name}) {
				t.Errorf("owned = %v", owned)
			}
			got, ok := st.Services[canary.Name]
			if tt.want == nil {
				if ok {
					t.Errorf("canary programmed: %v", got)
				}
			} else if diff := cmp.Diff(tt.want, got, protocmp.Transform()); diff != "" {
				t.Errorf("canary (-want +got):\n%s", diff)
			}
			for n, sv := range tt.services {
				if n != canary.Name && st.Services[n] != sv {
					t.Errorf("%s changed", n)
				}
			}
		})
	}
}

// TestDecorateCollisionsFollowChanges: a Service that takes the canary's
// cluster IP removes the canary on a partial sync, and its removal (or
// its move to another address) brings the canary back; the message stays
// the same while the node's address does.
func TestDecorateCollisionsFollowChanges(t *testing.T) {
	c := newCanary(t, "10.96.255.200:80")
	st := &dataplane.State{Config: nodeConfig("10.200.0.10"), Services: map[string]*switchyardv1.ServiceView{}}
	c.Decorate(st, nil)
	first := st.Services[canary.Name]
	if first == nil {
		t.Fatal("no canary")
	}
	st.Services["default/thief"] = &switchyardv1.ServiceView{ClusterIps: []string{"10.96.255.200"}}
	c.Decorate(st, map[string]struct{}{"default/thief": {}})
	if sv, ok := st.Services[canary.Name]; ok {
		t.Fatalf("canary kept beside a Service with its cluster IP: %v", sv)
	}
	// An unrelated change keeps the collision.
	st.Services["default/web"] = &switchyardv1.ServiceView{ClusterIps: []string{"10.96.0.10"}}
	c.Decorate(st, map[string]struct{}{"default/web": {}})
	if _, ok := st.Services[canary.Name]; ok {
		t.Fatal("canary back while the collision lasts")
	}
	st.Services["default/thief"] = &switchyardv1.ServiceView{ClusterIps: []string{"10.96.0.11"}}
	c.Decorate(st, map[string]struct{}{"default/thief": {}})
	if st.Services[canary.Name] != first {
		t.Errorf("canary after the collision = %v, want the same message as before", st.Services[canary.Name])
	}
	st.Config = nodeConfig("10.200.0.12")
	c.Decorate(st, map[string]struct{}{"node-a": {}})
	if got := st.Services[canary.Name].GetClusterEndpoints()[0].GetAddress(); got != "10.200.0.12" {
		t.Errorf("endpoint after the node moved = %s", got)
	}
}

// TestDecoratedStateForwards: what the canary adds is what a node
// forwards from itself to its own listener, in every mode's semantics
// (the explainer), and in the iptables mode's rules (its tracer over the
// rules it renders).
func TestDecoratedStateForwards(t *testing.T) {
	for _, vip := range []string{"10.96.255.200:80", "[fd00:96::c8]:80"} {
		c := newCanary(t, vip)
		st := &dataplane.State{Config: nodeConfig("10.200.0.10", "fd00::10"), Services: map[string]*switchyardv1.ServiceView{}}
		c.Decorate(st, nil)
		dst := netip.MustParseAddrPort(vip)
		node := netip.MustParseAddr("10.200.0.10")
		if dst.Addr().Is6() {
			node = netip.MustParseAddr("fd00::10")
		}
		pkt := explain.Packet{Protocol: dataplane.TCP, Src: node, Dst: dst.Addr(), Port: dst.Port()}
		want := []explain.Share{{Endpoint: netip.AddrPortFrom(node, canaryPort), Share: 1}}
		for _, mode := range []string{"iptables", "nftables", "ipvs", "userspace"} {
			v := explain.Explain(st, mode, pkt)
			if v.Action != explain.Forward || !slices.Equal(v.Endpoints, want) {
				t.Errorf("%s: %s: %+v, want forward to %v", mode, pkt, v, want)
			}
		}
		f := iptablestest.New()
		dp, err := iptables.New(iptables.Config{Runner: f, Flavour: xtables.FlavourLegacy})
		if err != nil {
			t.Fatal(err)
		}
		if err := dp.Apply(t.Context(), st, dataplane.ApplyOptions{Full: true}); err != nil {
			t.Fatal(err)
		}
		v, err := f.Trace(pkt, []netip.Addr{netip.MustParseAddr("10.200.0.10"), netip.MustParseAddr("fd00::10")})
		if err != nil || v.Action != explain.Forward || !slices.Equal(v.Endpoints, want) {
			t.Errorf("iptables rules: %s: %+v %v, want forward to %v", pkt, v, err, want)
		}
	}
}
