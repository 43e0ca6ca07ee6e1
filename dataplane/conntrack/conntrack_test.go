package conntrack_test

import (
	"net/netip"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/switchyard-proxy/switchyard/dataplane/conntrack"
)

func TestStale(t *testing.T) {
	vip := netip.MustParseAddrPort("10.96.0.1:53")
	a, b := netip.MustParseAddrPort("10.244.0.1:53"), netip.MustParseAddrPort("10.244.0.2:53")
	a2 := netip.MustParseAddrPort("10.244.0.1:5353") // a with another target port
	port := func(nodePort uint16, eps ...netip.AddrPort) conntrack.UDPPort {
		return conntrack.UDPPort{Dsts: []netip.AddrPort{vip}, NodePort: nodePort, Endpoints: eps}
	}
	cases := []struct {
		name       string
		prev, next map[string]conntrack.UDPPort
		want       []conntrack.Flow
	}{
		{name: "first sync", next: map[string]conntrack.UDPPort{"p": port(0, a)}},
		{name: "unchanged", prev: map[string]conntrack.UDPPort{"p": port(0, a)}, next: map[string]conntrack.UDPPort{"p": port(0, a)}},
		{name: "endpoint added", prev: map[string]conntrack.UDPPort{"p": port(0, a)}, next: map[string]conntrack.UDPPort{"p": port(0, a, b)}},
		{
			name: "endpoint removed", prev: map[string]conntrack.UDPPort{"p": port(30053, a, b)}, next: map[string]conntrack.UDPPort{"p": port(30053, a)},
			want: []conntrack.Flow{{Dst: vip, Endpoint: b}, {Dst: netip.AddrPortFrom(netip.Addr{}, 30053), NodePort: true, Endpoint: b}},
		},
		{
			// The pod stays, its target port changes (upstream e2e "should be
			// able to cleanup conntrack entries when UDP service target port
			// changes for a NodePort service"): flows to the old port go.
			name: "target port changed", prev: map[string]conntrack.UDPPort{"p": port(30053, a)}, next: map[string]conntrack.UDPPort{"p": port(30053, a2)},
			want: []conntrack.Flow{{Dst: vip, Endpoint: a}, {Dst: netip.AddrPortFrom(netip.Addr{}, 30053), NodePort: true, Endpoint: a}},
		},
		{
			name: "port removed", prev: map[string]conntrack.UDPPort{"p": port(0, a)},
			want: []conntrack.Flow{{Dst: vip, Endpoint: a}},
		},
		{
			name: "zero to some endpoints", prev: map[string]conntrack.UDPPort{"p": port(30053)}, next: map[string]conntrack.UDPPort{"p": port(30053, a)},
			want: []conntrack.Flow{{Dst: vip}, {Dst: netip.AddrPortFrom(netip.Addr{}, 30053), NodePort: true}},
		},
		{
			name: "new port with endpoints", next: map[string]conntrack.UDPPort{"p": port(30053, a)}, prev: map[string]conntrack.UDPPort{},
			want: []conntrack.Flow{{Dst: vip}, {Dst: netip.AddrPortFrom(netip.Addr{}, 30053), NodePort: true}},
		},
	}
	opts := cmp.Options{
		cmp.Comparer(func(x, y netip.Addr) bool { return x == y }),
		cmp.Comparer(func(x, y netip.AddrPort) bool { return x == y }),
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, conntrack.Stale(tc.prev, tc.next), opts); diff != "" {
				t.Errorf("Stale (-want +got):\n%s", diff)
			}
		})
	}
}
