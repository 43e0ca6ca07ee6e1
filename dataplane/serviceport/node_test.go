package serviceport_test

import (
	"net/netip"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/switchyard-proxy/switchyard/dataplane"
	"github.com/switchyard-proxy/switchyard/dataplane/serviceport"
	switchyardv1 "github.com/switchyard-proxy/switchyard/proto/switchyard/v1"
)

// TestReadNodePorts has one case per rule of node_port_addresses
// (nodeports.go), read for both families of a dual-stack node whose
// primary addresses are 10.0.0.5 and fd00::5.
func TestReadNodePorts(t *testing.T) {
	all := serviceport.NodePorts{All: true}
	addrs := func(s ...string) serviceport.NodePorts {
		var np serviceport.NodePorts
		for _, a := range s {
			np.Addrs = append(np.Addrs, netip.MustParseAddr(a))
		}
		return np
	}
	cidrs := func(s ...string) serviceport.NodePorts {
		var np serviceport.NodePorts
		for _, p := range s {
			np.Prefixes = append(np.Prefixes, netip.MustParsePrefix(p))
		}
		return np
	}
	for _, tc := range []struct {
		name     string
		list     []string
		def      string
		nodeIPs  []string
		v4, v6   serviceport.NodePorts
		skips    int // over both families' reads
		matchV4  map[string]bool
		noNodeIP bool
	}{{
		name: "empty list, iptables default: every local address",
		def:  serviceport.NodePortsAll,
		v4:   all, v6: all,
		matchV4: map[string]bool{"10.0.0.5": true, "192.168.1.9": true, "127.0.0.1": false},
	}, {
		name: "empty list, nftables default: the primary address of each family",
		def:  serviceport.NodePortsPrimary,
		v4:   addrs("10.0.0.5"), v6: addrs("fd00::5"),
		matchV4: map[string]bool{"10.0.0.5": true, "10.0.0.6": false, "192.168.1.9": false},
	}, {
		name:    "primary: the first node IP of the family, not the later ones",
		list:    []string{"primary"},
		nodeIPs: []string{"10.0.0.5", "fd00::5", "10.0.0.6", "203.0.113.5"},
		v4:      addrs("10.0.0.5"), v6: addrs("fd00::5"),
		matchV4: map[string]bool{"10.0.0.6": false, "203.0.113.5": false},
	}, {
		name:    "primary on a single-stack node: the other family is open",
		list:    []string{"primary"},
		nodeIPs: []string{"10.0.0.5"},
		v4:      addrs("10.0.0.5"), v6: all,
	}, {
		name:     "primary without node IPs: every local address, as kube-proxy",
		list:     []string{"primary"},
		noNodeIP: true,
		v4:       all, v6: all,
	}, {
		name: "CIDRs of one family: that family restricted, the other open",
		list: []string{"10.0.0.0/24", "192.168.0.0/16"},
		v4:   cidrs("10.0.0.0/24", "192.168.0.0/16"), v6: all,
		matchV4: map[string]bool{"10.0.0.5": true, "192.168.1.9": true, "172.16.0.1": false},
	}, {
		name: "CIDRs and primary together",
		list: []string{"primary", "192.168.0.0/16", "fd00:1::/64"},
		v4:   serviceport.NodePorts{Addrs: []netip.Addr{netip.MustParseAddr("10.0.0.5")}, Prefixes: []netip.Prefix{netip.MustParsePrefix("192.168.0.0/16")}},
		v6:   serviceport.NodePorts{Addrs: []netip.Addr{netip.MustParseAddr("fd00::5")}, Prefixes: []netip.Prefix{netip.MustParsePrefix("fd00:1::/64")}},
	}, {
		name: "all wins over everything",
		list: []string{"10.0.0.0/24", "all"},
		v4:   all, v6: all,
	}, {
		name: "a zero-length CIDR opens its family only",
		list: []string{"0.0.0.0/0", "fd00:1::/64"},
		v4:   all, v6: cidrs("fd00:1::/64"),
	}, {
		name:    "a CIDR holding loopback: loopback cut out",
		list:    []string{"96.0.0.0/3"},
		v4:      cidrs("96.0.0.0/4", "112.0.0.0/5", "120.0.0.0/6", "124.0.0.0/7", "126.0.0.0/8"),
		v6:      all,
		matchV4: map[string]bool{"96.0.0.1": true, "126.255.255.255": true, "127.0.0.1": false, "128.0.0.1": false},
	}, {
		name: "loopback only: nothing serves, and it says why",
		list: []string{"127.0.0.0/8", "::1/128"},
		v4:   serviceport.NodePorts{}, v6: serviceport.NodePorts{},
		skips: 2,
	}, {
		name: "localhost is skipped (in each family's read); a family with nothing else named is open",
		list: []string{"localhost", "10.0.0.0/24"},
		v4:   cidrs("10.0.0.0/24"), v6: all,
		skips: 2,
	}, {
		name: "bad entries skipped, host bits cleared, duplicates dropped",
		list: []string{"bogus", "10.0.0.7/24", "10.0.0.0/24"},
		v4:   cidrs("10.0.0.0/24"), v6: all,
		skips: 2, // the bad one, in each family's read
	}} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := &switchyardv1.NodeConfig{NodePortAddresses: tc.list, NodeIps: []string{"10.0.0.5", "fd00::5"}}
			if tc.nodeIPs != nil {
				cfg.NodeIps = tc.nodeIPs
			}
			if tc.noNodeIP {
				cfg.NodeIps = nil
			}
			var skips []string
			skip := func(svc, reason string) { skips = append(skips, reason) }
			v4 := serviceport.ReadNode(cfg, dataplane.IPv4, tc.def, skip).NodePorts
			v6 := serviceport.ReadNode(cfg, dataplane.IPv6, tc.def, skip).NodePorts
			opts := cmpopts.EquateComparable(netip.Addr{}, netip.Prefix{})
			if d := cmp.Diff(tc.v4, v4, opts); d != "" {
				t.Errorf("IPv4 (-want +got):\n%s", d)
			}
			if d := cmp.Diff(tc.v6, v6, opts); d != "" {
				t.Errorf("IPv6 (-want +got):\n%s", d)
			}
			if len(skips) != tc.skips {
				t.Errorf("skips %q, want %d", skips, tc.skips)
			}
			for a, want := range tc.matchV4 {
				if got := v4.Matches(netip.MustParseAddr(a)); got != want {
					t.Errorf("Matches(%s) = %v, want %v", a, got, want)
				}
			}
		})
	}
}

// TestReadNode covers the other NodeConfig fields every mode reads.
func TestReadNode(t *testing.T) {
	cfg := &switchyardv1.NodeConfig{
		ClusterCidrs:  []string{"10.244.0.0/16", "fd00:244::/56", "bad"},
		NodeIps:       []string{"10.0.0.5", "fd00::5", "nope"},
		ServiceCidrs:  []string{"10.96.0.0/16", "10.97.0.9/24", "fd00:96::/112", "x/1"},
		MasqueradeAll: true,
	}
	var skips []string
	got := serviceport.ReadNode(cfg, dataplane.IPv4, serviceport.NodePortsAll, func(_, r string) { skips = append(skips, r) })
	want := serviceport.Node{
		ClusterCIDRs:  []netip.Prefix{netip.MustParsePrefix("10.244.0.0/16")},
		NodeIPs:       []netip.Addr{netip.MustParseAddr("10.0.0.5")},
		MasqueradeAll: true,
		NodePorts:     serviceport.NodePorts{All: true},
		ServiceCIDRs:  []netip.Prefix{netip.MustParsePrefix("10.96.0.0/16"), netip.MustParsePrefix("10.97.0.0/24")},
	}
	if d := cmp.Diff(want, got, cmpopts.EquateComparable(netip.Addr{}, netip.Prefix{})); d != "" {
		t.Errorf("(-want +got):\n%s", d)
	}
	if len(skips) != 3 {
		t.Errorf("skips %q, want 3 (one per bad entry)", skips)
	}
	if n := serviceport.ReadNode(nil, dataplane.IPv6, serviceport.NodePortsPrimary, func(string, string) {}); !n.NodePorts.All {
		t.Errorf("nil config: node ports %+v, want every local address", n.NodePorts)
	}
}
