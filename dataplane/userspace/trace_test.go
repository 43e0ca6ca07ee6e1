package userspace

import (
	"net/netip"
	"testing"

	"github.com/switchyard-proxy/switchyard/dataplane"
	"github.com/switchyard-proxy/switchyard/dataplane/explain"
	switchyardv1 "github.com/switchyard-proxy/switchyard/proto/switchyard/v1"
)

// traceState is web (TCP 80 and UDP 53 on 10.96.0.10 and fd00::a, node
// port 30080, ClientIP affinity) and idle (no endpoints), on a node
// given by cfg.
func traceState(cfg *switchyardv1.NodeConfig) *dataplane.State {
	web := &switchyardv1.ServiceView{
		Namespace: "default", Name: "web", ClusterIps: []string{"10.96.0.10", "fd00::a"},
		Ports: []*switchyardv1.ServicePort{
			{Name: "http", Protocol: switchyardv1.Protocol_PROTOCOL_TCP, Port: 80, NodePort: 30080},
			{Name: "dns", Protocol: switchyardv1.Protocol_PROTOCOL_UDP, Port: 53},
			{Name: "sctp", Protocol: switchyardv1.Protocol_PROTOCOL_SCTP, Port: 9},
		},
		SessionAffinity:               switchyardv1.SessionAffinity_SESSION_AFFINITY_CLIENT_IP,
		SessionAffinityTimeoutSeconds: 30,
		ClusterEndpoints: []*switchyardv1.Endpoint{
			ep("10.244.1.2", "http", 8080, "dns", 5353, "sctp", 9), ep("10.244.0.2", "http", 8080), ep("fd00:244::2", "http", 8080),
		},
		HasAnyEndpoints: true,
	}
	idle := svcView("idle", netip.MustParseAddr("10.96.0.20"), protoTCP, 80)
	st := stateOf(web, idle)
	st.Config = cfg
	return st
}

func TestTrace(t *testing.T) {
	nodeIPs := &switchyardv1.NodeConfig{NodeName: "n", NodeIps: []string{"10.200.0.10"}}
	noNodeIPs := &switchyardv1.NodeConfig{NodeName: "n"}
	web4 := explain.Even(netip.MustParseAddrPort("10.244.0.2:8080"), netip.MustParseAddrPort("10.244.1.2:8080"))
	for _, tc := range []struct {
		name, pkt string
		node      *switchyardv1.NodeConfig
		want      explain.Verdict
	}{
		{"cluster IP: round robin from the node, with affinity", "tcp 10.244.0.5 -> 10.96.0.10:80", nodeIPs,
			explain.Verdict{Action: explain.Forward, Endpoints: web4, Masquerade: true, AffinitySeconds: 30}},
		{"a port's own endpoints", "udp 10.244.0.5 -> 10.96.0.10:53", nodeIPs,
			explain.Verdict{Action: explain.Forward, Endpoints: explain.Even(netip.MustParseAddrPort("10.244.1.2:5353")), Masquerade: true, AffinitySeconds: 30}},
		{"IPv6 frontend, IPv6 backends", "tcp fd00:244::5 -> [fd00::a]:80", nodeIPs,
			explain.Verdict{Action: explain.Forward, Endpoints: explain.Even(netip.MustParseAddrPort("[fd00:244::2]:8080")), Masquerade: true, AffinitySeconds: 30}},
		{"node port on a node IP", "tcp 192.0.2.50 -> 10.200.0.10:30080", nodeIPs,
			explain.Verdict{Action: explain.Forward, Endpoints: web4, Masquerade: true, AffinitySeconds: 30}},
		{"node port on an address no listener has", "tcp 192.0.2.50 -> 10.200.0.11:30080", nodeIPs,
			explain.Verdict{Action: explain.Pass}},
		{"node port on the wildcard without node IPs", "tcp 192.0.2.50 -> 10.200.0.11:30080", noNodeIPs,
			explain.Verdict{Action: explain.Forward, Endpoints: web4, Masquerade: true, AffinitySeconds: 30}},
		{"IPv6 wildcard node port: the family's own endpoints", "tcp fd00:1::5 -> [fd00::1]:30080", noNodeIPs,
			explain.Verdict{Action: explain.Forward, Endpoints: explain.Even(netip.MustParseAddrPort("[fd00:244::2]:8080")), Masquerade: true, AffinitySeconds: 30}},
		{"no endpoints: no listener, refused", "tcp 10.244.0.5 -> 10.96.0.20:80", nodeIPs,
			explain.Verdict{Action: explain.Reject}},
		{"a port the service does not have", "udp 10.244.0.5 -> 10.96.0.10:80", nodeIPs,
			explain.Verdict{Action: explain.Pass}},
		{"SCTP is not proxied", "sctp 10.244.0.5 -> 10.96.0.10:9", nodeIPs,
			explain.Verdict{Action: explain.Pass}},
		{"not a service address", "tcp 10.244.0.5 -> 10.96.0.99:80", nodeIPs,
			explain.Verdict{Action: explain.Pass}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pkt, err := explain.ParsePacket(tc.pkt)
			if err != nil {
				t.Fatal(err)
			}
			got := Trace(Planned(traceState(tc.node)), pkt)
			if d := explain.Diff(tc.want, got); len(d) > 0 {
				t.Errorf("%s: %v\n  got: %s\n  path: %q", pkt, d, got, got.Path)
			}
		})
	}
}

// TestPlannedIsWhatApplyOpens: the listeners Planned gives are the ones a
// Dataplane holds after applying the same state, Bound and Active aside.
func TestPlannedIsWhatApplyOpens(t *testing.T) {
	for _, cfg := range []*switchyardv1.NodeConfig{
		{NodeName: "n", NodeIps: []string{"10.200.0.10", "fd00:200::10"}},
		{NodeName: "n"},
	} {
		st := traceState(cfg)
		d := newSeamDP(t)
		apply(t, d, st)
		if diff := diffListeners(Planned(st).Listeners, d.Listeners()); diff != "" {
			t.Errorf("node IPs %v: listeners (-planned +open):\n%s", cfg.NodeIps, diff)
		}
	}
}
