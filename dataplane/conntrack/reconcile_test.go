package conntrack_test

import (
	"context"
	"errors"
	"net/netip"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/switchyard-proxy/switchyard/dataplane"
	"github.com/switchyard-proxy/switchyard/dataplane/conntrack"
	"github.com/switchyard-proxy/switchyard/dataplane/conntrack/conntracktest"
)

var addrOpts = cmp.Options{
	cmp.Comparer(func(x, y netip.Addr) bool { return x == y }),
	cmp.Comparer(func(x, y netip.AddrPort) bool { return x == y }),
}

func ap(s string) netip.AddrPort { return netip.MustParseAddrPort(s) }

// entry is a flow from the client's source port 40000 to dst, DNATed to
// reply (dst itself: not DNATed).
func entry(dst, reply string) conntrack.Entry {
	return conntrack.Entry{Src: ap("10.0.0.9:40000"), Dst: ap(dst), Reply: ap(reply)}
}

func TestReconcile(t *testing.T) {
	const (
		vip      = "10.96.0.10:53"
		vip2     = "10.96.0.11:53"
		extIP    = "203.0.113.7:53"
		nodeIP   = "192.168.1.10"
		node2IP  = "192.168.1.11"
		podA     = "10.244.0.1:5353"
		podA2    = "10.244.0.1:5354" // podA, another target port
		podB     = "10.244.1.1:5353"
		outside  = "198.51.100.1:53"
		nodePort = 30053
	)
	dns := conntrack.UDPPort{Dsts: []netip.AddrPort{ap(vip), ap(extIP)}, NodePort: nodePort, Endpoints: []netip.AddrPort{ap(podA)}}
	empty := conntrack.UDPPort{Dsts: []netip.AddrPort{ap(vip2)}, NodePort: 30054}
	live := conntrack.Live{
		Ports:        []conntrack.UDPPort{dns, empty},
		NodePortAddr: func(a netip.Addr) bool { return a == netip.MustParseAddr(nodeIP) },
		ServiceCIDRs: []netip.Prefix{netip.MustParsePrefix("10.96.0.0/16")},
	}
	cases := []struct {
		name string
		in   conntrack.Entry
		want conntrack.Reason // "" keeps the entry
	}{
		{"DNATed to a live endpoint", entry(vip, podA), ""},
		{"external IP to a live endpoint", entry(extIP, podA), ""},
		{"node port to a live endpoint", entry(nodeIP+":30053", podA), ""},
		{"endpoint gone", entry(vip, podB), conntrack.EndpointGone},
		{"endpoint gone via the external IP", entry(extIP, podB), conntrack.EndpointGone},
		{"endpoint gone via the node port", entry(nodeIP+":30053", podB), conntrack.EndpointGone},
		{"target port changed", entry(vip, podA2), conntrack.EndpointGone},
		{"scaled to zero", entry(vip2, podA), conntrack.NoEndpoints},
		{"scaled to zero, node port", entry(nodeIP+":30054", podA), conntrack.NoEndpoints},
		{"not NATed, port has endpoints", entry(vip, vip), conntrack.NotNATed},
		{"not NATed to the node port, port has endpoints", entry(nodeIP+":30053", nodeIP+":30053"), conntrack.NotNATed},
		{"not NATed, port has no endpoints", entry(vip2, vip2), ""},
		{"service gone", entry("10.96.0.12:53", podA), conntrack.ServiceGone},
		{"service port gone", entry("10.96.0.10:54", podA), conntrack.ServiceGone},
		{"not NATed to a Service range address without a port", entry("10.96.0.12:53", "10.96.0.12:53"), ""},
		{"another node's node port (not DNATed here)", entry(node2IP+":30053", node2IP+":30053"), ""},
		{"node port number on an address that serves none", entry(node2IP+":30053", podB), ""},
		{"someone else's DNAT outside our addresses", entry(outside, "172.17.0.2:53"), ""},
		{"plain traffic outside our addresses", entry(outside, outside), ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var want []conntrack.Deletion
			if tc.want != "" {
				want = []conntrack.Deletion{{Entry: tc.in, Reason: tc.want}}
			}
			if diff := cmp.Diff(want, conntrack.Reconcile([]conntrack.Entry{tc.in}, live), addrOpts); diff != "" {
				t.Errorf("Reconcile (-want +got):\n%s", diff)
			}
		})
	}
	t.Run("no node port addresses", func(t *testing.T) {
		l := live
		l.NodePortAddr = nil
		if got := conntrack.Reconcile([]conntrack.Entry{entry(nodeIP+":30053", podB)}, l); len(got) != 0 {
			t.Errorf("Reconcile = %v, want nothing: node ports answer nowhere", got)
		}
	})
	t.Run("nothing applied", func(t *testing.T) {
		if got := conntrack.Reconcile([]conntrack.Entry{entry(vip, podB), entry(vip, vip)}, conntrack.Live{}); len(got) != 0 {
			t.Errorf("Reconcile = %v, want nothing", got)
		}
	})
}

func TestReconcileTable(t *testing.T) {
	stale, kept := entry("10.96.0.10:53", "10.244.1.1:53"), entry("10.96.0.10:53", "10.244.0.1:53")
	live := func() conntrack.Live {
		return conntrack.Live{Ports: []conntrack.UDPPort{{Dsts: []netip.AddrPort{ap("10.96.0.10:53")}, Endpoints: []netip.AddrPort{ap("10.244.0.1:53")}}}}
	}
	t.Run("deletes the stale entries only", func(t *testing.T) {
		tab := conntracktest.New()
		tab.Add(dataplane.IPv4, stale, kept)
		tab.Add(dataplane.IPv6, conntrack.Entry{Src: ap("[fd00::9]:1"), Dst: ap("[fd00:96::10]:53"), Reply: ap("[fd00:244::1]:53")})
		res, err := conntrack.ReconcileTable(t.Context(), tab, dataplane.IPv4, live)
		if err != nil {
			t.Fatal(err)
		}
		want := conntrack.Result{Listed: 2, Stale: []conntrack.Deletion{{Entry: stale, Reason: conntrack.EndpointGone}}, Deleted: 1}
		if diff := cmp.Diff(want, res, addrOpts); diff != "" {
			t.Errorf("result (-want +got):\n%s", diff)
		}
		wantDump := "IPv4 10.0.0.9:40000 -> 10.96.0.10:53 via 10.244.0.1:53\nIPv6 [fd00::9]:1 -> [fd00:96::10]:53 via [fd00:244::1]:53"
		if diff := cmp.Diff(wantDump, tab.Dump()); diff != "" {
			t.Errorf("table (-want +got):\n%s", diff)
		}
	})
	t.Run("nothing stale deletes nothing", func(t *testing.T) {
		tab := conntracktest.New()
		tab.Add(dataplane.IPv4, kept)
		if _, err := conntrack.ReconcileTable(t.Context(), tab, dataplane.IPv4, live); err != nil || tab.Deletes != 0 {
			t.Errorf("err %v, %d delete calls; want none", err, tab.Deletes)
		}
	})
	t.Run("live is read after the listing", func(t *testing.T) {
		tab := conntracktest.New()
		tab.Add(dataplane.IPv4, stale)
		listed := 0
		_, err := conntrack.ReconcileTable(t.Context(), tab, dataplane.IPv4, func() conntrack.Live {
			listed = tab.Lists
			return live()
		})
		if err != nil || listed != 1 {
			t.Errorf("err %v; live read after %d listings, want 1", err, listed)
		}
	})
	boom := errors.New("boom")
	for _, tc := range []struct {
		name      string
		list, del error
	}{{"list fails", boom, nil}, {"delete fails", nil, boom}} {
		t.Run(tc.name, func(t *testing.T) {
			tab := conntracktest.New()
			tab.Add(dataplane.IPv4, stale)
			tab.ListErr, tab.DeleteErr = tc.list, tc.del
			if _, err := conntrack.ReconcileTable(t.Context(), tab, dataplane.IPv4, live); !errors.Is(err, boom) {
				t.Errorf("err = %v, want boom wrapped", err)
			}
		})
	}
	t.Run("canceled before deleting", func(t *testing.T) {
		tab := conntracktest.New()
		tab.Add(dataplane.IPv4, stale)
		ctx, cancel := context.WithCancel(t.Context())
		cancel()
		if _, err := conntrack.ReconcileTable(ctx, tab, dataplane.IPv4, live); !errors.Is(err, context.Canceled) || tab.Deletes != 0 {
			t.Errorf("err %v, %d deletes; want canceled, none", err, tab.Deletes)
		}
	})
}

// BenchmarkReconcilePure is the judging part of one reconcile alone: 100k
// entries against 1,000 UDP ports of 5 endpoints, one in six DNATed to
// a gone endpoint (no kernel).
func BenchmarkReconcilePure(b *testing.B) {
	const n, ports, eps = 100_000, 1000, 5
	vip := func(i int) netip.AddrPort {
		return netip.AddrPortFrom(netip.AddrFrom4([4]byte{10, 96, byte(i >> 8), byte(i)}), 53)
	}
	ep := func(i, j int) netip.AddrPort {
		return netip.AddrPortFrom(netip.AddrFrom4([4]byte{10, 244, byte(i >> 8), byte(i)}), uint16(5000+j))
	}
	live := conntrack.Live{ServiceCIDRs: []netip.Prefix{netip.MustParsePrefix("10.96.0.0/16")}}
	for i := range ports {
		u := conntrack.UDPPort{Dsts: []netip.AddrPort{vip(i)}}
		for j := range eps {
			u.AddEndpoint(ep(i, j))
		}
		live.Ports = append(live.Ports, u)
	}
	entries := make([]conntrack.Entry, n)
	for k := range entries {
		i := k % ports
		src := netip.AddrPortFrom(netip.AddrFrom4([4]byte{10, 1, byte(k >> 16), byte(k >> 8)}), uint16(1024+k%256))
		entries[k] = conntrack.Entry{Src: src, Dst: vip(i), Reply: ep(i, k%(eps+1))}
	}
	b.ReportAllocs()
	for b.Loop() {
		conntrack.Reconcile(entries, live)
	}
}
