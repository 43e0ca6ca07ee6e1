package netns

import (
	"fmt"
	"net/netip"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// describe renders a plan as sorted, human-readable lines for comparison.
func describe(p Plan) []string {
	out := []string{fmt.Sprintf("network ns=%s cidr=%s bridge=%s", p.Network.NS, p.Network.CIDR, p.Network.Bridge)}
	if p.DualStack() {
		out = append(out, fmt.Sprintf("  cidr6=%s serviceCIDR6=%s", p.Network.CIDR6, p.ServiceCIDR6))
	}
	for _, s := range p.Network.Sysctls {
		out = append(out, "  sysctl "+s.Key+"="+s.Value)
	}
	for _, n := range p.Nodes {
		out = append(out, fmt.Sprintf("%s ns=%s ip=%s/%d port=%s podCIDR=%s gw=%s",
			n.Name, n.NS, n.IP, n.Subnet.Bits(), n.NetPort, n.PodCIDR, n.PodGateway))
		if n.IP6.IsValid() {
			out = append(out, fmt.Sprintf("  ip6=%s/%d podCIDR6=%s gw6=%s", n.IP6, n.Subnet6.Bits(), n.PodCIDR6, n.PodGateway6))
		}
		for _, r := range n.Routes {
			out = append(out, "  route "+r.String())
		}
		for _, s := range n.Sysctls {
			out = append(out, "  sysctl "+s.Key+"="+s.Value)
		}
		for _, pod := range n.Pods {
			out = append(out, fmt.Sprintf("  %s ns=%s ip=%s/%d port=%s route=%s",
				pod.Name, pod.NS, pod.IP, pod.Subnet.Bits(), pod.NodePort, pod.Routes[0]))
			if pod.IP6.IsValid() {
				out = append(out, fmt.Sprintf("    ip6=%s/%d route=%s", pod.IP6, pod.Subnet6.Bits(), pod.Routes[1]))
			}
		}
	}
	for _, h := range []Host{p.Client, p.Control} {
		out = append(out, fmt.Sprintf("%s ns=%s ip=%s/%d port=%s", h.Name, h.NS, h.IP, h.Subnet.Bits(), h.NetPort))
		if h.IP6.IsValid() {
			out = append(out, fmt.Sprintf("  ip6=%s/%d", h.IP6, h.Subnet6.Bits()))
		}
		for _, r := range h.Routes {
			out = append(out, "  route "+r.String())
		}
	}
	return out
}

// planTests are the cases of TestNewPlan: a spec and the described plan.
var planTests = []struct {
	name string
	spec Spec
	want []string
}{{
	name: "defaults: one node, one pod",
	spec: Spec{},
	want: []string{
		"network ns=sy-abc123-net cidr=10.200.0.0/24 bridge=br0",
		"  sysctl net.bridge.bridge-nf-call-iptables=0",
		"  sysctl net.bridge.bridge-nf-call-ip6tables=0",
		"  sysctl net.bridge.bridge-nf-call-arptables=0",
		"node-0 ns=sy-abc123-node0 ip=10.200.0.10/24 port=node0 podCIDR=10.244.0.0/24 gw=10.244.0.1",
		"  route 10.96.0.0/16 dev eth0",
		"  sysctl net.ipv4.ip_forward=1",
		"  sysctl net.ipv4.conf.all.rp_filter=0",
		"  sysctl net.ipv4.conf.default.rp_filter=0",
		"  sysctl net.bridge.bridge-nf-call-iptables=1",
		"  pod-0 ns=sy-abc123-pod0 ip=10.244.0.2/24 port=vpod0 route=0.0.0.0/0 via 10.244.0.1 dev eth0",
		"client ns=sy-abc123-client ip=10.200.0.2/24 port=client",
		"  route 10.244.0.0/24 via 10.200.0.10 dev eth0",
		"  route 10.96.0.0/16 via 10.200.0.10 dev eth0",
		"control ns=sy-abc123-control ip=10.200.0.3/24 port=control",
		"  route 10.244.0.0/24 via 10.200.0.10 dev eth0",
		"  route 10.96.0.0/16 via 10.200.0.10 dev eth0",
	},
}, {
	name: "two nodes, three pods spread, gateway node 1, localnet, no bridge-nf",
	spec: Spec{Nodes: 2, Pods: 3, GatewayNode: 1, RouteLocalnet: true, DisableBridgeNF: true},
	want: []string{
		"network ns=sy-abc123-net cidr=10.200.0.0/24 bridge=br0",
		"  sysctl net.bridge.bridge-nf-call-iptables=0",
		"  sysctl net.bridge.bridge-nf-call-ip6tables=0",
		"  sysctl net.bridge.bridge-nf-call-arptables=0",
		"node-0 ns=sy-abc123-node0 ip=10.200.0.10/24 port=node0 podCIDR=10.244.0.0/24 gw=10.244.0.1",
		"  route 10.244.1.0/24 via 10.200.0.11 dev eth0",
		"  route 10.96.0.0/16 dev eth0",
		"  sysctl net.ipv4.ip_forward=1",
		"  sysctl net.ipv4.conf.all.rp_filter=0",
		"  sysctl net.ipv4.conf.default.rp_filter=0",
		"  sysctl net.bridge.bridge-nf-call-iptables=0",
		"  sysctl net.ipv4.conf.all.route_localnet=1",
		"  pod-0 ns=sy-abc123-pod0 ip=10.244.0.2/24 port=vpod0 route=0.0.0.0/0 via 10.244.0.1 dev eth0",
		"  pod-2 ns=sy-abc123-pod2 ip=10.244.0.3/24 port=vpod2 route=0.0.0.0/0 via 10.244.0.1 dev eth0",
		"node-1 ns=sy-abc123-node1 ip=10.200.0.11/24 port=node1 podCIDR=10.244.1.0/24 gw=10.244.1.1",
		"  route 10.244.0.0/24 via 10.200.0.10 dev eth0",
		"  route 10.96.0.0/16 dev eth0",
		"  sysctl net.ipv4.ip_forward=1",
		"  sysctl net.ipv4.conf.all.rp_filter=0",
		"  sysctl net.ipv4.conf.default.rp_filter=0",
		"  sysctl net.bridge.bridge-nf-call-iptables=0",
		"  sysctl net.ipv4.conf.all.route_localnet=1",
		"  pod-1 ns=sy-abc123-pod1 ip=10.244.1.2/24 port=vpod1 route=0.0.0.0/0 via 10.244.1.1 dev eth0",
		"client ns=sy-abc123-client ip=10.200.0.2/24 port=client",
		"  route 10.244.0.0/24 via 10.200.0.10 dev eth0",
		"  route 10.244.1.0/24 via 10.200.0.11 dev eth0",
		"  route 10.96.0.0/16 via 10.200.0.11 dev eth0",
		"control ns=sy-abc123-control ip=10.200.0.3/24 port=control",
		"  route 10.244.0.0/24 via 10.200.0.10 dev eth0",
		"  route 10.244.1.0/24 via 10.200.0.11 dev eth0",
		"  route 10.96.0.0/16 via 10.200.0.11 dev eth0",
	},
}, {
	name: "custom plan, pod routes via gateway, /26 node CIDRs",
	spec: Spec{
		Nodes: 2, PodsPerNode: 1, PodRoutesViaGateway: true, Prefix: "t-",
		NetworkCIDR: netip.MustParsePrefix("192.168.50.0/24"), FirstNodeHost: 100, ClientHost: 7, ControlHost: 8,
		ClusterCIDR: netip.MustParsePrefix("172.20.0.0/24"), NodeCIDRBits: 26,
		ServiceCIDR: netip.MustParsePrefix("172.21.0.0/16"),
	},
	want: []string{
		"network ns=t-abc123-net cidr=192.168.50.0/24 bridge=br0",
		"  sysctl net.bridge.bridge-nf-call-iptables=0",
		"  sysctl net.bridge.bridge-nf-call-ip6tables=0",
		"  sysctl net.bridge.bridge-nf-call-arptables=0",
		"node-0 ns=t-abc123-node0 ip=192.168.50.100/24 port=node0 podCIDR=172.20.0.0/26 gw=172.20.0.1",
		"  route 172.20.0.64/26 via 192.168.50.101 dev eth0",
		"  route 172.21.0.0/16 dev eth0",
		"  sysctl net.ipv4.ip_forward=1",
		"  sysctl net.ipv4.conf.all.rp_filter=0",
		"  sysctl net.ipv4.conf.default.rp_filter=0",
		"  sysctl net.bridge.bridge-nf-call-iptables=1",
		"  pod-0 ns=t-abc123-pod0 ip=172.20.0.2/26 port=vpod0 route=0.0.0.0/0 via 172.20.0.1 dev eth0",
		"node-1 ns=t-abc123-node1 ip=192.168.50.101/24 port=node1 podCIDR=172.20.0.64/26 gw=172.20.0.65",
		"  route 172.20.0.0/26 via 192.168.50.100 dev eth0",
		"  route 172.21.0.0/16 dev eth0",
		"  sysctl net.ipv4.ip_forward=1",
		"  sysctl net.ipv4.conf.all.rp_filter=0",
		"  sysctl net.ipv4.conf.default.rp_filter=0",
		"  sysctl net.bridge.bridge-nf-call-iptables=1",
		"  pod-1 ns=t-abc123-pod1 ip=172.20.0.66/26 port=vpod1 route=0.0.0.0/0 via 172.20.0.65 dev eth0",
		"client ns=t-abc123-client ip=192.168.50.7/24 port=client",
		"  route 172.20.0.0/26 via 192.168.50.100 dev eth0",
		"  route 172.20.0.64/26 via 192.168.50.100 dev eth0",
		"  route 172.21.0.0/16 via 192.168.50.100 dev eth0",
		"control ns=t-abc123-control ip=192.168.50.8/24 port=control",
		"  route 172.20.0.0/26 via 192.168.50.100 dev eth0",
		"  route 172.20.0.64/26 via 192.168.50.100 dev eth0",
		"  route 172.21.0.0/16 via 192.168.50.100 dev eth0",
	},
}, {
	name: "dual-stack: two nodes, three pods, IPv6 beside every IPv4 address and route",
	spec: Spec{Nodes: 2, Pods: 3, DualStack: true},
	want: []string{
		"network ns=sy-abc123-net cidr=10.200.0.0/24 bridge=br0",
		"  cidr6=fd00:200::/64 serviceCIDR6=fd00:96::/112",
		"  sysctl net.bridge.bridge-nf-call-iptables=0",
		"  sysctl net.bridge.bridge-nf-call-ip6tables=0",
		"  sysctl net.bridge.bridge-nf-call-arptables=0",
		"node-0 ns=sy-abc123-node0 ip=10.200.0.10/24 port=node0 podCIDR=10.244.0.0/24 gw=10.244.0.1",
		"  ip6=fd00:200::a/64 podCIDR6=fd00:244::/64 gw6=fd00:244::1",
		"  route 10.244.1.0/24 via 10.200.0.11 dev eth0",
		"  route 10.96.0.0/16 dev eth0",
		"  route fd00:244:0:1::/64 via fd00:200::b dev eth0",
		"  route fd00:96::/112 dev eth0",
		"  sysctl net.ipv4.ip_forward=1",
		"  sysctl net.ipv4.conf.all.rp_filter=0",
		"  sysctl net.ipv4.conf.default.rp_filter=0",
		"  sysctl net.bridge.bridge-nf-call-iptables=1",
		"  sysctl net.ipv6.conf.all.forwarding=1",
		"  sysctl net.bridge.bridge-nf-call-ip6tables=1",
		"  pod-0 ns=sy-abc123-pod0 ip=10.244.0.2/24 port=vpod0 route=0.0.0.0/0 via 10.244.0.1 dev eth0",
		"    ip6=fd00:244::2/64 route=::/0 via fd00:244::1 dev eth0",
		"  pod-2 ns=sy-abc123-pod2 ip=10.244.0.3/24 port=vpod2 route=0.0.0.0/0 via 10.244.0.1 dev eth0",
		"    ip6=fd00:244::3/64 route=::/0 via fd00:244::1 dev eth0",
		"node-1 ns=sy-abc123-node1 ip=10.200.0.11/24 port=node1 podCIDR=10.244.1.0/24 gw=10.244.1.1",
		"  ip6=fd00:200::b/64 podCIDR6=fd00:244:0:1::/64 gw6=fd00:244:0:1::1",
		"  route 10.244.0.0/24 via 10.200.0.10 dev eth0",
		"  route 10.96.0.0/16 dev eth0",
		"  route fd00:244::/64 via fd00:200::a dev eth0",
		"  route fd00:96::/112 dev eth0",
		"  sysctl net.ipv4.ip_forward=1",
		"  sysctl net.ipv4.conf.all.rp_filter=0",
		"  sysctl net.ipv4.conf.default.rp_filter=0",
		"  sysctl net.bridge.bridge-nf-call-iptables=1",
		"  sysctl net.ipv6.conf.all.forwarding=1",
		"  sysctl net.bridge.bridge-nf-call-ip6tables=1",
		"  pod-1 ns=sy-abc123-pod1 ip=10.244.1.2/24 port=vpod1 route=0.0.0.0/0 via 10.244.1.1 dev eth0",
		"    ip6=fd00:244:0:1::2/64 route=::/0 via fd00:244:0:1::1 dev eth0",
		"client ns=sy-abc123-client ip=10.200.0.2/24 port=client",
		"  ip6=fd00:200::2/64",
		"  route 10.244.0.0/24 via 10.200.0.10 dev eth0",
		"  route 10.244.1.0/24 via 10.200.0.11 dev eth0",
		"  route 10.96.0.0/16 via 10.200.0.10 dev eth0",
		"  route fd00:244::/64 via fd00:200::a dev eth0",
		"  route fd00:244:0:1::/64 via fd00:200::b dev eth0",
		"  route fd00:96::/112 via fd00:200::a dev eth0",
		"control ns=sy-abc123-control ip=10.200.0.3/24 port=control",
		"  ip6=fd00:200::3/64",
		"  route 10.244.0.0/24 via 10.200.0.10 dev eth0",
		"  route 10.244.1.0/24 via 10.200.0.11 dev eth0",
		"  route 10.96.0.0/16 via 10.200.0.10 dev eth0",
		"  route fd00:244::/64 via fd00:200::a dev eth0",
		"  route fd00:244:0:1::/64 via fd00:200::b dev eth0",
		"  route fd00:96::/112 via fd00:200::a dev eth0",
	},
}}

func TestNewPlan(t *testing.T) {
	for _, tc := range planTests {
		t.Run(tc.name, func(t *testing.T) {
			p, err := NewPlan(tc.spec, "abc123")
			if err != nil {
				t.Fatalf("NewPlan: %v", err)
			}
			if diff := cmp.Diff(tc.want, describe(p)); diff != "" {
				t.Errorf("plan mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

func TestPlanNamespacesAndPods(t *testing.T) {
	p, err := NewPlan(Spec{Nodes: 2, Pods: 3}, "abc123")
	if err != nil {
		t.Fatal(err)
	}
	wantNS := []string{
		"sy-abc123-net", "sy-abc123-node0", "sy-abc123-node1",
		"sy-abc123-pod0", "sy-abc123-pod1", "sy-abc123-pod2", "sy-abc123-client", "sy-abc123-control",
	}
	if diff := cmp.Diff(wantNS, p.Namespaces()); diff != "" {
		t.Errorf("Namespaces (-want +got):\n%s", diff)
	}
	var gotPods []string
	for _, pod := range p.Pods() {
		gotPods = append(gotPods, fmt.Sprintf("%s@node-%d=%s", pod.Name, pod.Node, pod.IP))
	}
	wantPods := []string{"pod-0@node-0=10.244.0.2", "pod-1@node-1=10.244.1.2", "pod-2@node-0=10.244.0.3"}
	if diff := cmp.Diff(wantPods, gotPods); diff != "" {
		t.Errorf("Pods (-want +got):\n%s", diff)
	}
	if pod, ok := p.Pod("pod-2"); !ok || pod.NS != "sy-abc123-pod2" {
		t.Errorf("Pod(pod-2) = %+v, %v", pod, ok)
	}
	if _, ok := p.Pod("pod-9"); ok {
		t.Error("Pod(pod-9) found, want not found")
	}
}

func TestNewPlanRejects(t *testing.T) {
	tests := []struct {
		name    string
		spec    Spec
		id      string
		wantErr string
	}{
		{"negative nodes", Spec{Nodes: -1}, "abc", "nodes must be at least 1"},
		{"pods and podsPerNode", Spec{Pods: 2, PodsPerNode: 2}, "abc", "not both"},
		{"gateway out of range", Spec{Nodes: 2, GatewayNode: 2}, "abc", "gatewayNode 2 out of range"},
		{"bad prefix", Spec{Prefix: "Sy_"}, "abc", "prefix"},
		{"bad id", Spec{}, "ABC", "invalid topology id"},
		{"ipv6 network in the IPv4 field", Spec{NetworkCIDR: netip.MustParsePrefix("fd00::/64")}, "abc", "must be IPv4"},
		{"ipv6 field without dualStack", Spec{ServiceCIDR6: netip.MustParsePrefix("fd00:96::/112")}, "abc", "without dualStack"},
		{"ipv6 node bits without dualStack", Spec{NodeCIDRBits6: 64}, "abc", "without dualStack"},
		{"ipv4 in an ipv6 field", Spec{DualStack: true, ClusterCIDR6: netip.MustParsePrefix("10.1.0.0/16")}, "abc", "must be IPv6"},
		{"ipv4-mapped ipv6", Spec{DualStack: true, NetworkCIDR6: netip.MustParsePrefix("::ffff:10.9.0.0/120")}, "abc", "must be IPv6"},
		{"ipv6 host bits", Spec{DualStack: true, ServiceCIDR6: netip.MustParsePrefix("fd00:96::1/112")}, "abc", "host bits"},
		{"ipv6 overlap", Spec{DualStack: true, ServiceCIDR6: netip.MustParsePrefix("fd00:244::/112")}, "abc", "overlaps"},
		{"ipv6 node bits", Spec{DualStack: true, NodeCIDRBits6: 48}, "abc", "nodeCIDRBits6"},
		{"too many nodes for the ipv6 cluster CIDR", Spec{Nodes: 3, DualStack: true, NodeCIDRBits6: 57}, "abc", "IPv6 pod CIDR"},
		{"host bits", Spec{ServiceCIDR: netip.MustParsePrefix("10.96.0.1/16")}, "abc", "host bits"},
		{"overlap", Spec{ServiceCIDR: netip.MustParsePrefix("10.244.0.0/16")}, "abc", "overlaps"},
		{"node bits too short", Spec{NodeCIDRBits: 8}, "abc", "nodeCIDRBits"},
		{"too many nodes for cluster CIDR", Spec{Nodes: 257, NetworkCIDR: netip.MustParsePrefix("10.200.0.0/16")}, "abc", "pod CIDR"},
		{"too many nodes for network", Spec{Nodes: 250}, "abc", "does not fit"},
		{"too many pods per node", Spec{PodsPerNode: 62, NodeCIDRBits: 26}, "abc", "does not fit"},
		{"client inside node range", Spec{Nodes: 3, ClientHost: 12}, "abc", "assigned to both"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := NewPlan(tc.spec, tc.id)
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("NewPlan error = %v, want one containing %q", err, tc.wantErr)
			}
		})
	}
}

func TestAddressArithmetic(t *testing.T) {
	subnets := []struct {
		in      string
		bits, i int
		want    string // "" wants an error
	}{
		{"10.244.0.0/16", 24, 0, "10.244.0.0/24"},
		{"10.244.0.0/16", 24, 255, "10.244.255.0/24"},
		{"10.244.0.0/16", 26, 5, "10.244.1.64/26"},
		{"10.244.0.0/16", 16, 0, "10.244.0.0/16"},
		{"10.244.0.0/16", 24, 256, ""},
		{"fd00:244::/56", 64, 0, "fd00:244::/64"},
		{"fd00:244::/56", 64, 1, "fd00:244:0:1::/64"},
		{"fd00:244::/56", 64, 255, "fd00:244:0:ff::/64"},
		{"fd00:244::/56", 120, 3, "fd00:244::300/120"},
		{"fd00:244::/56", 64, 256, ""},
		{"fd00:244::/56", 129, 0, ""},
	}
	for _, tc := range subnets {
		got, err := subnet(netip.MustParsePrefix(tc.in), tc.bits, tc.i)
		if tc.want == "" && err == nil || tc.want != "" && (err != nil || got.String() != tc.want) {
			t.Errorf("subnet(%s, %d, %d) = %s, %v; want %q", tc.in, tc.bits, tc.i, got, err, tc.want)
		}
	}
	hosts := []struct {
		in   string
		n    int
		want string // "" wants an error: all-zeros, all-ones or out of range
	}{
		{"10.200.0.0/24", 254, "10.200.0.254"},
		{"10.200.0.0/24", 0, ""},
		{"10.200.0.0/24", 255, ""},
		{"10.200.0.0/24", -1, ""},
		{"fd00:200::/64", 10, "fd00:200::a"},
		{"fd00:200::/120", 255, ""},
	}
	for _, tc := range hosts {
		got, err := hostAddr(netip.MustParsePrefix(tc.in), tc.n)
		if tc.want == "" && err == nil || tc.want != "" && (err != nil || got.String() != tc.want) {
			t.Errorf("hostAddr(%s, %d) = %s, %v; want %q", tc.in, tc.n, got, err, tc.want)
		}
	}
}

func TestNewID(t *testing.T) {
	seen := map[string]bool{}
	for range 10 {
		id, err := NewID()
		if err != nil {
			t.Fatal(err)
		}
		if !idPattern.MatchString(id) || len(id) != 6 {
			t.Fatalf("NewID() = %q, want 6 chars matching %s", id, idPattern)
		}
		seen[id] = true
	}
	if len(seen) < 2 {
		t.Errorf("10 ids gave %d distinct values", len(seen))
	}
}

// TestNodeSysctlsICMPRateLimit: NoICMPRateLimit turns the nodes' ICMP
// error limit off, for IPv6 too on a dual-stack topology.
func TestNodeSysctlsICMPRateLimit(t *testing.T) {
	for _, tc := range []struct {
		spec Spec
		want []Sysctl
	}{
		{Spec{}, nil},
		{Spec{NoICMPRateLimit: true}, []Sysctl{{"net.ipv4.icmp_ratelimit", "0"}}},
		{Spec{NoICMPRateLimit: true, DualStack: true},
			[]Sysctl{{"net.ipv4.icmp_ratelimit", "0"}, {"net.ipv6.icmp.ratelimit", "0"}}},
	} {
		var got []Sysctl
		for _, s := range nodeSysctls(tc.spec) {
			if strings.Contains(s.Key, ".icmp") {
				got = append(got, s)
			}
		}
		if diff := cmp.Diff(tc.want, got); diff != "" {
			t.Errorf("%+v: ICMP sysctls (-want +got):\n%s", tc.spec, diff)
		}
	}
}
