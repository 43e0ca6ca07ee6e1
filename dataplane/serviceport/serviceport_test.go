package serviceport_test

import (
	"net/netip"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/switchyard-proxy/switchyard/dataplane"
	"github.com/switchyard-proxy/switchyard/dataplane/conntrack"
	"github.com/switchyard-proxy/switchyard/dataplane/serviceport"
	switchyardv1 "github.com/switchyard-proxy/switchyard/proto/switchyard/v1"
)

func TestRead(t *testing.T) {
	ep := func(addr string, term bool, ports ...*switchyardv1.EndpointPort) *switchyardv1.Endpoint {
		return &switchyardv1.Endpoint{Address: addr, Terminating: term, Ports: ports}
	}
	http := &switchyardv1.EndpointPort{Name: "http", Port: 8080}
	view := func() *switchyardv1.ServiceView {
		return &switchyardv1.ServiceView{
			Namespace: "ns", Name: "web",
			ClusterIps:               []string{"10.96.0.1", "fd00::1", "10.96.0.1", "999.1.1.1", "fe80::1%eth0"},
			LoadBalancerSourceRanges: []string{"192.0.2.7/24", "2001:db8::/32"},
			ExternalTrafficPolicy:    switchyardv1.TrafficPolicy_TRAFFIC_POLICY_LOCAL,
			HealthCheckNodePort:      31000,
			SessionAffinity:          switchyardv1.SessionAffinity_SESSION_AFFINITY_CLIENT_IP,
			HasAnyEndpoints:          true,
			Ports: []*switchyardv1.ServicePort{
				{Name: "http", Protocol: switchyardv1.Protocol_PROTOCOL_TCP, Port: 80, NodePort: 30080},
				{Name: "http", Protocol: switchyardv1.Protocol_PROTOCOL_UDP, Port: 81},
				{Name: "zero", Protocol: switchyardv1.Protocol_PROTOCOL_TCP},
			},
			ClusterEndpoints: []*switchyardv1.Endpoint{
				ep("10.244.0.9", true, http), ep("10.244.0.2", false, http), ep("::ffff:10.244.0.2", true, http),
				ep("fd00::9", false, http), ep("bogus", false, http), ep("10.244.0.3", false, &switchyardv1.EndpointPort{Name: "other", Port: 1}),
			},
		}
	}
	var skips []string
	skip := func(svc, reason string) { skips = append(skips, svc+": "+reason) }
	svc, ok := serviceport.Read("ns/web", view(), dataplane.IPv4, skip)
	if !ok {
		t.Fatal("view refused")
	}
	want := serviceport.Service{
		Name: "ns/web", Namespace: "ns", ServiceName: "web", HealthCheckNodePort: 31000,
		Ports: []serviceport.Port{{
			Name: "http", Label: "ns/web:http", Protocol: dataplane.TCP, Port: 80, NodePort: 30080,
			ClusterIPs:   []netip.Addr{netip.MustParseAddr("10.96.0.1")},
			SourceRanges: []netip.Prefix{netip.MustParsePrefix("192.0.2.0/24")}, HasRanges: true,
			Cluster: []serviceport.Endpoint{
				{Addr: netip.MustParseAddrPort("10.244.0.2:8080")},
				{Addr: netip.MustParseAddrPort("10.244.0.9:8080"), Terminating: true},
			},
			Affinity: 1,
			Internal: serviceport.Traffic{Endpoints: []serviceport.Endpoint{
				{Addr: netip.MustParseAddrPort("10.244.0.2:8080")},
				{Addr: netip.MustParseAddrPort("10.244.0.9:8080"), Terminating: true},
			}, NoEndpoints: serviceport.Drop},
			External:     serviceport.Traffic{Local: true, NoEndpoints: serviceport.Drop},
			ShortCircuit: true,
		}},
	}
	opts := cmp.Options{
		cmp.Comparer(func(x, y netip.Addr) bool { return x == y }),
		cmp.Comparer(func(x, y netip.AddrPort) bool { return x == y }),
		cmp.Comparer(func(x, y netip.Prefix) bool { return x == y }),
	}
	if diff := cmp.Diff(want, svc, opts); diff != "" {
		t.Errorf("IPv4 read (-want +got):\n%s", diff)
	}
	wantSkips := []string{
		`ns/web: bad address "999.1.1.1": ParseAddr("999.1.1.1"): IPv4 field has value >255`,
		`ns/web: bad address "fe80::1%eth0": has a zone`,
		`ns/web: endpoint: bad address "bogus": ParseAddr("bogus"): unable to parse IP`,
		`ns/web: port "http": bad or duplicate name`,
		`ns/web: port "zero": bad port number`,
	}
	if diff := cmp.Diff(wantSkips, skips); diff != "" {
		t.Errorf("skips (-want +got):\n%s", diff)
	}

	six, _ := serviceport.Read("ns/web", view(), dataplane.IPv6, func(string, string) {})
	if got := six.Ports[0].ClusterIPs; len(got) != 1 || got[0] != netip.MustParseAddr("fd00::1") {
		t.Errorf("IPv6 cluster IPs = %v", got)
	}
	if got := six.Ports[0].Cluster; len(got) != 1 || got[0].Addr != netip.MustParseAddrPort("[fd00::9]:8080") {
		t.Errorf("IPv6 endpoints = %v", got)
	}

	for _, tc := range []struct {
		name, key string
		mut       func(*switchyardv1.ServiceView)
	}{
		{"bad name", "ns/web", func(sv *switchyardv1.ServiceView) { sv.Name = "Web" }},
		{"key is not the name", "ns/other", func(*switchyardv1.ServiceView) {}},
	} {
		sv := view()
		tc.mut(sv)
		if _, ok := serviceport.Read(tc.key, sv, dataplane.IPv4, func(string, string) {}); ok {
			t.Errorf("%s: accepted", tc.name)
		}
	}
	if _, ok := serviceport.Read("x", nil, dataplane.IPv4, func(string, string) {}); ok {
		t.Error("nil view accepted")
	}

	cluster := view()
	cluster.ExternalTrafficPolicy = switchyardv1.TrafficPolicy_TRAFFIC_POLICY_CLUSTER
	if got, _ := serviceport.Read("ns/web", cluster, dataplane.IPv4, func(string, string) {}); got.HealthCheckNodePort != 0 {
		t.Errorf("health check node port %d without ETP Local", got.HealthCheckNodePort)
	}
}

func TestUDPFlows(t *testing.T) {
	ap := netip.MustParseAddrPort
	a := netip.MustParseAddr
	p := serviceport.Port{Protocol: dataplane.UDP, Port: 53, NodePort: 30053,
		ClusterIPs: []netip.Addr{a("10.96.0.10")}, ExternalIPs: []netip.Addr{a("192.0.2.1")}, LBIPs: []netip.Addr{a("192.0.2.2")},
		Cluster: []serviceport.Endpoint{{Addr: ap("10.244.0.2:5353")}, {Addr: ap("10.244.0.3:5353")}},
		Local:   []serviceport.Endpoint{{Addr: ap("10.244.0.3:5353")}}}
	got, ok := p.UDPFlows()
	want := conntrack.UDPPort{NodePort: 30053,
		Dsts:      []netip.AddrPort{ap("10.96.0.10:53"), ap("192.0.2.1:53"), ap("192.0.2.2:53")},
		Endpoints: []netip.AddrPort{ap("10.244.0.2:5353"), ap("10.244.0.3:5353")}}
	if !ok {
		t.Fatal("udp port: ok = false")
	}
	if d := cmp.Diff(want, got, cmpopts.EquateComparable(netip.Addr{}, netip.AddrPort{})); d != "" {
		t.Errorf("(-want +got):\n%s", d)
	}
	p.Protocol = dataplane.TCP
	if _, ok := p.UDPFlows(); ok {
		t.Error("tcp port: ok = true")
	}
}
