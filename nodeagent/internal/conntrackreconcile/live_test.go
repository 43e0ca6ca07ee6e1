package conntrackreconcile

import (
	"net/netip"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/switchyard-proxy/switchyard/dataplane"
	"github.com/switchyard-proxy/switchyard/dataplane/conntrack"
	"github.com/switchyard-proxy/switchyard/dataplane/dataplanetest"
	"github.com/switchyard-proxy/switchyard/nodeagent/internal/view"
	switchyardv1 "github.com/switchyard-proxy/switchyard/proto/switchyard/v1"
)

// udpService is ns/name with one UDP port "dns" 53 (node port 30053) and
// one TCP port "web" 80, at clusterIP, served by eps on 5353 and 8080.
func udpService(name, clusterIP string, eps ...string) *switchyardv1.ServiceView {
	sv := &switchyardv1.ServiceView{Namespace: "ns", Name: name, ClusterIps: []string{clusterIP},
		Ports: []*switchyardv1.ServicePort{
			{Name: "dns", Protocol: switchyardv1.Protocol_PROTOCOL_UDP, Port: 53, NodePort: 30053},
			{Name: "web", Protocol: switchyardv1.Protocol_PROTOCOL_TCP, Port: 80},
		}}
	for _, a := range eps {
		sv.ClusterEndpoints = append(sv.ClusterEndpoints, &switchyardv1.Endpoint{Address: a, Ready: true, Serving: true,
			Ports: []*switchyardv1.EndpointPort{{Name: "dns", Port: 5353}, {Name: "web", Port: 8080}}})
	}
	return sv
}

func nodeConfig(npAddrs ...string) *switchyardv1.NodeConfig {
	return &switchyardv1.NodeConfig{NodeIps: []string{"192.168.1.10", "fd00:1::10"}, ServiceCidrs: []string{"10.96.0.0/16", "fd00:96::/112"},
		NodePortAddresses: npAddrs}
}

func TestLive(t *testing.T) {
	st := dataplanetest.NewState(nodeConfig(), udpService("dns", "10.96.0.10", "10.244.0.1"), udpService("v6", "fd00:96::10", "fd00:244::1"))
	live := Live(st, dataplane.IPv4, switchyardv1.DataplaneMode_DATAPLANE_MODE_IPTABLES)
	want := []conntrack.UDPPort{{Dsts: []netip.AddrPort{netip.MustParseAddrPort("10.96.0.10:53")}, NodePort: 30053,
		Endpoints: []netip.AddrPort{netip.MustParseAddrPort("10.244.0.1:5353")}}}
	opts := cmp.Comparer(func(x, y netip.AddrPort) bool { return x == y })
	if diff := cmp.Diff(want, live.Ports, opts); diff != "" {
		t.Errorf("ports (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]netip.Prefix{netip.MustParsePrefix("10.96.0.0/16")}, live.ServiceCIDRs, cmp.Comparer(func(x, y netip.Prefix) bool { return x == y })); diff != "" {
		t.Errorf("service CIDRs (-want +got):\n%s", diff)
	}
	for _, tc := range []struct {
		mode    switchyardv1.DataplaneMode
		npAddrs []string
		addr    string
		want    bool
	}{
		{switchyardv1.DataplaneMode_DATAPLANE_MODE_IPTABLES, nil, "192.168.1.10", true},
		// "all" and a CIDR cover other nodes' addresses: only the node's own count.
		{switchyardv1.DataplaneMode_DATAPLANE_MODE_IPTABLES, nil, "192.168.1.11", false},
		{switchyardv1.DataplaneMode_DATAPLANE_MODE_IPTABLES, []string{"192.168.1.0/24"}, "192.168.1.11", false},
		{switchyardv1.DataplaneMode_DATAPLANE_MODE_IPTABLES, []string{"192.168.1.0/24"}, "192.168.1.10", true},
		{switchyardv1.DataplaneMode_DATAPLANE_MODE_IPTABLES, []string{"10.0.0.0/8"}, "192.168.1.10", false},
		{switchyardv1.DataplaneMode_DATAPLANE_MODE_NFTABLES, nil, "192.168.1.10", true},
		{switchyardv1.DataplaneMode_DATAPLANE_MODE_NFTABLES, nil, "127.0.0.1", false},
	} {
		st := dataplanetest.NewState(nodeConfig(tc.npAddrs...))
		if got := Live(st, dataplane.IPv4, tc.mode).NodePortAddr(netip.MustParseAddr(tc.addr)); got != tc.want {
			t.Errorf("%s, node port addresses %v: node ports on %s = %v, want %v", dataplane.ModeName(tc.mode), tc.npAddrs, tc.addr, got, tc.want)
		}
	}
}

func TestRemoved(t *testing.T) {
	viewOf := func(svcs ...*switchyardv1.ServiceView) *view.View {
		v := &view.View{Resources: map[string]*switchyardv1.Resource{}}
		for _, sv := range svcs {
			v.Resources[sv.GetNamespace()+"/"+sv.GetName()] = &switchyardv1.Resource{Body: &switchyardv1.Resource_Service{Service: sv}}
		}
		return v
	}
	two := viewOf(udpService("dns", "10.96.0.10", "10.244.0.1", "10.244.0.2"))
	one := viewOf(udpService("dns", "10.96.0.10", "10.244.0.1"))
	moved := udpService("dns", "10.96.0.10", "10.244.0.1")
	moved.ClusterEndpoints[0].Ports[0].Port = 5354
	tcpOnly := func(eps ...string) *switchyardv1.ServiceView {
		sv := udpService("web", "10.96.0.11", eps...)
		sv.Ports = sv.Ports[1:]
		return sv
	}
	dns := map[string]struct{}{"ns/dns": {}}
	for _, tc := range []struct {
		name       string
		prev, next *view.View
		changed    map[string]struct{}
		want       bool
	}{
		{"first sync", nil, one, nil, true},
		{"endpoint removed", two, one, dns, true},
		{"endpoint removed, full sync", two, one, nil, true},
		{"endpoint added", one, two, dns, false},
		{"target port changed", one, viewOf(moved), dns, true},
		{"service deleted", one, viewOf(), dns, true},
		{"unchanged, full sync", one, one, nil, false},
		{"removal not among the changed names", two, one, map[string]struct{}{"ns/other": {}}, false},
		{"TCP endpoint removed", viewOf(tcpOnly("10.244.0.1", "10.244.0.2")), viewOf(tcpOnly("10.244.0.1")), map[string]struct{}{"ns/web": {}}, false},
	} {
		if got := Removed(tc.prev, tc.next, tc.changed); got != tc.want {
			t.Errorf("%s: Removed = %v, want %v", tc.name, got, tc.want)
		}
	}
}
