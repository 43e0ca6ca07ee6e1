package cluster

import (
	"encoding/json"
	"net/netip"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestDualStackArguments pins what Config.DualStack changes in the
// components' arguments and the CNI configuration, and that the IPv4-only
// bed (CI's, the conformance matrix's) keeps exactly its old values.
func TestDualStackArguments(t *testing.T) {
	v4 := &node{ip: NodeIP(1), podCIDR: netip.MustParsePrefix("10.244.1.0/24"), gateway: netip.MustParseAddr("10.244.1.1")}
	ds := *v4
	ds.ip6, ds.podCIDR6, ds.gateway6 = NodeIP6(1), netip.MustParsePrefix("fd00:244:0:1::/64"), netip.MustParseAddr("fd00:244:0:1::1")
	type ranges = [][]map[string]string
	tests := []struct {
		name                      string
		cfg                       Config
		n                         *node
		serviceCIDRs, clusterCIDR string
		nodeIPs                   string
		ranges                    ranges
		routes                    []string
	}{
		{"ipv4", Config{}, v4, "10.96.0.0/16", "10.244.0.0/16", "10.201.0.11",
			ranges{{{"subnet": "10.244.1.0/24", "gateway": "10.244.1.1"}}}, []string{"0.0.0.0/0"}},
		{"dual-stack", Config{DualStack: true}, &ds, "10.96.0.0/16,fd00:96::/112", "10.244.0.0/16,fd00:244::/56",
			"10.201.0.11,fd00:201::b",
			ranges{{{"subnet": "10.244.1.0/24", "gateway": "10.244.1.1"}}, {{"subnet": "fd00:244:0:1::/64", "gateway": "fd00:244:0:1::1"}}},
			[]string{"0.0.0.0/0", "::/0"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.cfg.serviceCIDRs(); got != tt.serviceCIDRs {
				t.Errorf("serviceCIDRs = %q, want %q", got, tt.serviceCIDRs)
			}
			if got := tt.cfg.clusterCIDRs(); got != tt.clusterCIDR {
				t.Errorf("clusterCIDRs = %q, want %q", got, tt.clusterCIDR)
			}
			if got := tt.n.nodeIPs(); got != tt.nodeIPs {
				t.Errorf("nodeIPs = %q, want %q", got, tt.nodeIPs)
			}
			var conf struct {
				Plugins []struct {
					Type string
					IPAM struct {
						Ranges ranges
						Routes []struct{ Dst string }
					}
				}
			}
			if err := json.Unmarshal([]byte(tt.n.cniConfig()), &conf); err != nil {
				t.Fatalf("CNI config is not JSON: %v\n%s", err, tt.n.cniConfig())
			}
			ipam := conf.Plugins[0].IPAM
			if diff := cmp.Diff(tt.ranges, ipam.Ranges); diff != "" {
				t.Errorf("host-local ranges (-want +got):\n%s", diff)
			}
			var routes []string
			for _, r := range ipam.Routes {
				routes = append(routes, r.Dst)
			}
			if diff := cmp.Diff(tt.routes, routes); diff != "" {
				t.Errorf("routes (-want +got):\n%s", diff)
			}
		})
	}
}

// TestDualStackWorkload checks the edits DualStackWorkload makes to
// EchoWorkload's text, which would otherwise fail silently: the echo pods
// also serve UDP, the no-endpoint Service selects nothing, the UDP Service
// is UDP.
func TestDualStackWorkload(t *testing.T) {
	m := DualStackWorkload("ns", 3, 0)
	for _, want := range []string{
		"args: [serve-hostname, --tcp, --udp, --http=false, --port=9376]",
		"name: " + IPv6NoEndpointsSvc + ", namespace: ns}\nspec:\n  type: ClusterIP\n  ipFamilyPolicy: SingleStack\n  ipFamilies: [IPv6]\n  selector: {app: nothing}",
		"name: " + IPv6UDPSvc + ", namespace: ns}\nspec:\n  type: ClusterIP\n  ipFamilyPolicy: SingleStack\n  ipFamilies: [IPv6]\n  selector: {app: echo}\n  ports: [{protocol: UDP, port: 80",
		"  externalTrafficPolicy: Local\n",
	} {
		if !strings.Contains(m, want) {
			t.Errorf("workload lacks %q:\n%s", want, m)
		}
	}
	if n := strings.Count(m, "kind: Service\n"); n != 8 {
		t.Errorf("%d Services, want 8 (echo, echo-np and six dual-stack ones)", n)
	}
}
