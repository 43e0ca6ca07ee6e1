package userspace

import (
	"net/netip"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/protobuf/proto"

	"github.com/switchyard-proxy/switchyard/dataplane"
	"github.com/switchyard-proxy/switchyard/dataplane/internal/sorted"
	switchyardv1 "github.com/switchyard-proxy/switchyard/proto/switchyard/v1"
)

// planLine is one frontend as the plan tests compare it.
type planLine struct {
	Key      string
	Kind     Kind
	Backends []string
	Affinity time.Duration
}

func summarize(r planResult) (lines []planLine, empty []string, skips []string) {
	for _, k := range sorted.KeysFunc(r.fronts, frontendKey.compare) {
		f := r.fronts[k]
		l := planLine{Key: k.String(), Kind: f.kind, Affinity: f.affinity}
		for _, b := range f.backends {
			l.Backends = append(l.Backends, b.String())
		}
		lines = append(lines, l)
	}
	for _, k := range r.empty {
		empty = append(empty, k.String())
	}
	for _, s := range r.skips {
		skips = append(skips, s.Service+": "+s.Reason)
	}
	return lines, empty, skips
}

func ep(addr string, ports ...any) *switchyardv1.Endpoint {
	e := &switchyardv1.Endpoint{Address: addr, Ready: true, Serving: true}
	for i := 0; i < len(ports); i += 2 {
		e.Ports = append(e.Ports, &switchyardv1.EndpointPort{Name: ports[i].(string), Port: uint32(ports[i+1].(int))})
	}
	return e
}

func TestPlan(t *testing.T) {
	const (
		tcp = switchyardv1.Protocol_PROTOCOL_TCP
		udp = switchyardv1.Protocol_PROTOCOL_UDP
	)
	local := switchyardv1.TrafficPolicy_TRAFFIC_POLICY_LOCAL
	base := func() *switchyardv1.ServiceView {
		return &switchyardv1.ServiceView{
			Namespace: "default", Name: "web", ClusterIps: []string{"10.96.0.10"},
			Ports: []*switchyardv1.ServicePort{
				{Name: "http", Protocol: tcp, Port: 80, NodePort: 30080},
				{Name: "dns", Protocol: udp, Port: 53},
			},
			ClusterEndpoints: []*switchyardv1.Endpoint{ep("10.244.1.2", "http", 8080, "dns", 5353), ep("10.244.0.2", "http", 8080)},
			LocalEndpoints:   []*switchyardv1.Endpoint{ep("10.244.0.2", "http", 8080)},
			HasAnyEndpoints:  true,
		}
	}
	nodeCfg := &switchyardv1.NodeConfig{NodeIps: []string{"10.200.0.10"}}
	for _, tc := range []struct {
		name  string
		edit  func(sv *switchyardv1.ServiceView)
		node  *switchyardv1.NodeConfig
		want  []planLine
		empty []string
		skips []string
	}{
		{
			name: "cluster policies: cluster endpoints by port name, node port on node IPs",
			node: nodeCfg,
			want: []planLine{
				{Key: "tcp/10.96.0.10:80", Kind: KindClusterIP, Backends: []string{"10.244.0.2:8080", "10.244.1.2:8080"}},
				{Key: "tcp/10.200.0.10:30080", Kind: KindNodePort, Backends: []string{"10.244.0.2:8080", "10.244.1.2:8080"}},
				{Key: "udp/10.96.0.10:53", Kind: KindClusterIP, Backends: []string{"10.244.1.2:5353"}},
			},
		},
		{
			name: "node port addresses select among the node IPs: a CIDR",
			node: &switchyardv1.NodeConfig{NodeIps: []string{"10.200.0.10", "10.200.0.11"}, NodePortAddresses: []string{"10.200.0.11/32"}},
			want: []planLine{
				{Key: "tcp/10.96.0.10:80", Kind: KindClusterIP, Backends: []string{"10.244.0.2:8080", "10.244.1.2:8080"}},
				{Key: "tcp/10.200.0.11:30080", Kind: KindNodePort, Backends: []string{"10.244.0.2:8080", "10.244.1.2:8080"}},
				{Key: "udp/10.96.0.10:53", Kind: KindClusterIP, Backends: []string{"10.244.1.2:5353"}},
			},
		},
		{
			name: "node port addresses select among the node IPs: primary, not every node IP as by default",
			node: &switchyardv1.NodeConfig{NodeIps: []string{"10.200.0.10", "10.200.0.11"}, NodePortAddresses: []string{"primary"}},
			want: []planLine{
				{Key: "tcp/10.96.0.10:80", Kind: KindClusterIP, Backends: []string{"10.244.0.2:8080", "10.244.1.2:8080"}},
				{Key: "tcp/10.200.0.10:30080", Kind: KindNodePort, Backends: []string{"10.244.0.2:8080", "10.244.1.2:8080"}},
				{Key: "udp/10.96.0.10:53", Kind: KindClusterIP, Backends: []string{"10.244.1.2:5353"}},
			},
		},
		{
			name: "no node IPs: node port on both wildcards, IPv6 one empty",
			want: []planLine{
				{Key: "tcp/0.0.0.0:30080", Kind: KindNodePort, Backends: []string{"10.244.0.2:8080", "10.244.1.2:8080"}},
				{Key: "tcp/10.96.0.10:80", Kind: KindClusterIP, Backends: []string{"10.244.0.2:8080", "10.244.1.2:8080"}},
				{Key: "udp/10.96.0.10:53", Kind: KindClusterIP, Backends: []string{"10.244.1.2:5353"}},
			},
			empty: []string{"tcp/[::]:30080"},
		},
		{
			name: "ETP Local: external traffic to local endpoints only",
			node: nodeCfg,
			edit: func(sv *switchyardv1.ServiceView) {
				sv.ExternalTrafficPolicy = local
				sv.ExternalIps = []string{"192.0.2.7"}
				sv.LoadBalancerIps = []string{"203.0.113.9", "203.0.113.9"}
			},
			want: []planLine{
				{Key: "tcp/10.96.0.10:80", Kind: KindClusterIP, Backends: []string{"10.244.0.2:8080", "10.244.1.2:8080"}},
				{Key: "tcp/10.200.0.10:30080", Kind: KindNodePort, Backends: []string{"10.244.0.2:8080"}},
				{Key: "tcp/192.0.2.7:80", Kind: KindExternalIP, Backends: []string{"10.244.0.2:8080"}},
				{Key: "tcp/203.0.113.9:80", Kind: KindLoadBalancerIP, Backends: []string{"10.244.0.2:8080"}},
				{Key: "udp/10.96.0.10:53", Kind: KindClusterIP, Backends: []string{"10.244.1.2:5353"}},
			},
			empty: []string{"udp/192.0.2.7:53", "udp/203.0.113.9:53"},
		},
		{
			name: "ITP Local: cluster IPs to local endpoints; none local for dns",
			node: nodeCfg,
			edit: func(sv *switchyardv1.ServiceView) { sv.InternalTrafficPolicy = local },
			want: []planLine{
				{Key: "tcp/10.96.0.10:80", Kind: KindClusterIP, Backends: []string{"10.244.0.2:8080"}},
				{Key: "tcp/10.200.0.10:30080", Kind: KindNodePort, Backends: []string{"10.244.0.2:8080", "10.244.1.2:8080"}},
			},
			empty: []string{"udp/10.96.0.10:53"},
		},
		{
			name: "affinity, dual stack, families kept apart",
			node: nodeCfg,
			edit: func(sv *switchyardv1.ServiceView) {
				sv.SessionAffinity = switchyardv1.SessionAffinity_SESSION_AFFINITY_CLIENT_IP
				sv.SessionAffinityTimeoutSeconds = 30
				sv.ClusterIps = append(sv.ClusterIps, "fd00::a")
				sv.Ports = sv.Ports[:1]
				sv.Ports[0].NodePort = 0
				sv.ClusterEndpoints = append(sv.ClusterEndpoints, ep("fd00:244::2", "http", 8080))
			},
			want: []planLine{
				{Key: "tcp/10.96.0.10:80", Kind: KindClusterIP, Backends: []string{"10.244.0.2:8080", "10.244.1.2:8080"}, Affinity: 30 * time.Second},
				{Key: "tcp/[fd00::a]:80", Kind: KindClusterIP, Backends: []string{"[fd00:244::2]:8080"}, Affinity: 30 * time.Second},
			},
		},
		{
			name: "bad input is skipped, the rest kept",
			node: nodeCfg,
			edit: func(sv *switchyardv1.ServiceView) {
				sv.ClusterIps = append(sv.ClusterIps, "not-an-ip")
				sv.Ports = append(sv.Ports,
					&switchyardv1.ServicePort{Name: "sctp", Protocol: switchyardv1.Protocol_PROTOCOL_SCTP, Port: 9},
					&switchyardv1.ServicePort{Name: "http", Protocol: tcp, Port: 81},
					&switchyardv1.ServicePort{Name: "big", Protocol: tcp, Port: 70000})
				sv.ClusterEndpoints = append(sv.ClusterEndpoints, ep("bogus", "http", 1), ep("10.244.0.2", "http", 8080))
			},
			want: []planLine{
				{Key: "tcp/10.96.0.10:80", Kind: KindClusterIP, Backends: []string{"10.244.0.2:8080", "10.244.1.2:8080"}},
				{Key: "tcp/10.200.0.10:30080", Kind: KindNodePort, Backends: []string{"10.244.0.2:8080", "10.244.1.2:8080"}},
				{Key: "udp/10.96.0.10:53", Kind: KindClusterIP, Backends: []string{"10.244.1.2:5353"}},
			},
			// serviceport's reasons, each once though both families
			// read the view; the mode's own protocol check comes after.
			skips: []string{
				`default/web: bad address "not-an-ip": ParseAddr("not-an-ip"): unable to parse IP`,
				`default/web: endpoint: bad address "bogus": ParseAddr("bogus"): unable to parse IP`,
				`default/web: port "http": bad or duplicate name`,
				`default/web: port "big": bad port number`,
				`default/web: port "sctp": protocol SCTP not proxied in userspace`,
			},
		},
		{
			name: "a port no endpoint lists is refused while the other serves",
			node: nodeCfg,
			edit: func(sv *switchyardv1.ServiceView) {
				sv.ClusterEndpoints = []*switchyardv1.Endpoint{ep("10.244.1.2", "http", 8080)}
				sv.LocalEndpoints = nil
				sv.Ports[0].HasAnyEndpoints, sv.Ports[1].HasAnyEndpoints = proto.Bool(true), proto.Bool(false)
			},
			want: []planLine{
				{Key: "tcp/10.96.0.10:80", Kind: KindClusterIP, Backends: []string{"10.244.1.2:8080"}},
				{Key: "tcp/10.200.0.10:30080", Kind: KindNodePort, Backends: []string{"10.244.1.2:8080"}},
			},
			empty: []string{"udp/10.96.0.10:53"},
		},
		{
			name: "one pod address on two target ports of one port is two backends",
			node: nodeCfg,
			edit: func(sv *switchyardv1.ServiceView) {
				sv.ClusterEndpoints = []*switchyardv1.Endpoint{ep("10.244.1.2", "http", 8080), ep("10.244.1.2", "http", 8081)}
				sv.Ports = sv.Ports[:1]
			},
			want: []planLine{
				{Key: "tcp/10.96.0.10:80", Kind: KindClusterIP, Backends: []string{"10.244.1.2:8080", "10.244.1.2:8081"}},
				{Key: "tcp/10.200.0.10:30080", Kind: KindNodePort, Backends: []string{"10.244.1.2:8080", "10.244.1.2:8081"}},
			},
		},
		{
			name: "a zoned address is refused as in every mode",
			node: nodeCfg,
			edit: func(sv *switchyardv1.ServiceView) {
				sv.ClusterIps = append(sv.ClusterIps, "fe80::1%eth0")
				sv.Ports = sv.Ports[:1]
			},
			want: []planLine{
				{Key: "tcp/10.96.0.10:80", Kind: KindClusterIP, Backends: []string{"10.244.0.2:8080", "10.244.1.2:8080"}},
				{Key: "tcp/10.200.0.10:30080", Kind: KindNodePort, Backends: []string{"10.244.0.2:8080", "10.244.1.2:8080"}},
			},
			skips: []string{`default/web: bad address "fe80::1%eth0": has a zone`},
		},
		{
			name: "no endpoints: no listener",
			node: nodeCfg,
			edit: func(sv *switchyardv1.ServiceView) {
				sv.ClusterEndpoints, sv.LocalEndpoints, sv.HasAnyEndpoints = nil, nil, false
			},
			empty: []string{"tcp/10.96.0.10:80", "tcp/10.200.0.10:30080", "udp/10.96.0.10:53"},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sv := base()
			if tc.edit != nil {
				tc.edit(sv)
			}
			st := stateOf(sv)
			st.Config = tc.node
			lines, empty, skips := summarize(plan(st))
			if diff := cmp.Diff(tc.want, lines); diff != "" {
				t.Errorf("frontends (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.empty, empty); diff != "" {
				t.Errorf("empty (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.skips, skips); diff != "" {
				t.Errorf("skips (-want +got):\n%s", diff)
			}
		})
	}
}

func TestPlanConflictFirstNameWins(t *testing.T) {
	ip := netip.MustParseAddr("10.96.0.10")
	b := netip.MustParseAddrPort("10.244.0.2:80")
	st := stateOf(svcView("b", ip, switchyardv1.Protocol_PROTOCOL_TCP, 80, b), svcView("a", ip, switchyardv1.Protocol_PROTOCOL_TCP, 80, b))
	st.Services["default/mismatch"] = svcView("other", ip, switchyardv1.Protocol_PROTOCOL_TCP, 81, b)
	lines, _, skips := summarize(plan(st))
	if len(lines) != 1 || plan(st).fronts[frontendKey{dataplane.TCP, netip.AddrPortFrom(ip, 80)}].service != "default/a" {
		t.Errorf("want one frontend owned by default/a, got %+v", lines)
	}
	want := []string{
		"default/b: clusterIP tcp/10.96.0.10:80 already used by default/a:p",
		"default/mismatch: resource name does not match default/other",
	}
	if diff := cmp.Diff(want, skips); diff != "" {
		t.Errorf("skips (-want +got):\n%s", diff)
	}
}
