package ipvs_test

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/switchyard-proxy/switchyard/dataplane"
	"github.com/switchyard-proxy/switchyard/dataplane/ipvs"
	"github.com/switchyard-proxy/switchyard/dataplane/ipvs/ipvstest"
	switchyardv1 "github.com/switchyard-proxy/switchyard/proto/switchyard/v1"
)

// foreign writes other software's state: an LVS service, a set and a
// DNAT rule.
func foreign(t *testing.T, f *ipvstest.Fake) {
	t.Helper()
	vs := ipvs.VirtualServer{Key: ipvs.VSKey{Addr: netip.MustParseAddr("192.0.2.1"), Port: 443, Protocol: dataplane.TCP}, Scheduler: "wlc"}
	f.AddForeign(vs, ipvs.RealServer{Addr: netip.MustParseAddrPort("192.0.2.10:443"), Weight: 3})
	f.AddForeignSet("DOCKER-SET", "hash:ip", "inet", "172.17.0.2")
	if err := f.IPTables().Insert("iptables", "nat", "PREROUTING", "-j DNAT --to-destination 172.17.0.2"); err != nil {
		t.Fatal(err)
	}
}

// kubeProxyIPVS writes what kube-proxy's ipvs mode keeps: its canary,
// kube-ipvs0 with a service address, and that address's virtual server.
func kubeProxyIPVS(t *testing.T, f *ipvstest.Fake) {
	t.Helper()
	ctx := context.Background()
	if err := f.IPTables().Restore("iptables", "*nat\n:KUBE-PROXY-CANARY - [0:0]\nCOMMIT\n"); err != nil {
		t.Fatal(err)
	}
	a := netip.MustParseAddr("10.96.0.99")
	if err := f.EnsureDummy(ctx, ipvs.DummyInterface); err != nil {
		t.Fatal(err)
	}
	if err := f.AddAddress(ctx, ipvs.DummyInterface, a); err != nil {
		t.Fatal(err)
	}
	f.AddForeign(ipvs.VirtualServer{Key: ipvs.VSKey{Addr: a, Port: 53, Protocol: dataplane.UDP}, Scheduler: "rr"})
}

// nodePortState is one NodePort service: a virtual server on the service
// address and one on the node address.
func nodePortState() *switchyardv1.ServiceView {
	sv := svc("a", "10.96.0.1", tcp, "10.244.0.1")
	sv.Ports[0].NodePort = 30080
	sv.Type = switchyardv1.ServiceType_SERVICE_TYPE_NODE_PORT
	return sv
}

// TestCleanupLeftovers: a fresh Dataplane (an agent restarted in another
// mode, or --cleanup) removes what an earlier process programmed and
// nothing else.
func TestCleanupLeftovers(t *testing.T) {
	tests := []struct {
		name string
		// others writes foreign (or kube-proxy's) state before ours.
		others func(t *testing.T, f *ipvstest.Fake)
		// ours programs this mode, as an earlier process did.
		ours bool
		// late writes state after ours (ours would take a kube-ipvs0
		// address it finds for its own).
		late func(t *testing.T, f *ipvstest.Fake)
		// check replaces the comparison with the state before ours.
		check func(t *testing.T, dump string)
		// wantReads says whether Cleanup reads the rules back at all.
		wantReads bool
	}{
		{name: "nothing of ours: no read-back, no change", others: foreign},
		{name: "leftovers of an earlier process", others: foreign, ours: true, wantReads: true},
		{name: "kube-proxy's kube-ipvs0 alone is left", others: kubeProxyIPVS, wantReads: true},
		{
			name:      "with kube-proxy's canary: our chains and sets go, kube-ipvs0 and virtual servers stay",
			others:    foreign,
			ours:      true,
			late:      kubeProxyIPVS,
			wantReads: true,
			check: func(t *testing.T, dump string) {
				for _, gone := range []string{"SWYD-IPVS"} {
					if strings.Contains(dump, gone) {
						t.Errorf("%s left:\n%s", gone, dump)
					}
				}
				for _, kept := range []string{"link kube-ipvs0", "10.96.0.99", "vs TCP 10.96.0.1:80", "vs UDP 10.96.0.99:53", "vs TCP 192.0.2.1:443", "DOCKER-SET", "KUBE-PROXY-CANARY"} {
					if !strings.Contains(dump, kept) {
						t.Errorf("%q removed, may be kube-proxy's or foreign:\n%s", kept, dump)
					}
				}
			},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := ipvstest.New()
			tc.others(t, f)
			want := f.Dump()
			if tc.ours {
				apply(t, newDataplane(t, f, ipvs.Config{}), state(nil, nodePortState()), false)
				if !strings.Contains(f.Dump(), "vs TCP 10.200.0.10:30080") {
					t.Fatalf("no node port virtual server:\n%s", f.Dump())
				}
			}
			if tc.late != nil {
				tc.late(t, f)
			}
			f.ResetCalls()
			f.IPTables().ResetCalls()
			if err := newDataplane(t, f, ipvs.Config{}).Cleanup(t.Context()); err != nil {
				t.Fatal(err)
			}
			if tc.check != nil {
				tc.check(t, f.Dump())
			} else if d := cmp.Diff(want, f.Dump()); d != "" {
				t.Errorf("after Cleanup (-want +got):\n%s", d)
			}
			reads := 0
			for _, c := range f.IPTables().Calls() {
				if strings.HasSuffix(c.Argv[0], "-save") {
					reads++
				}
			}
			if got := reads > 0; got != tc.wantReads {
				t.Errorf("iptables read-backs: %d, want any: %t", reads, tc.wantReads)
			}
		})
	}
}

// TestNoIPVSIsUnavailable: a cleanup of every mode skips ipvs on a kernel
// without IPVS by dataplane.ErrUnavailable.
func TestNoIPVSIsUnavailable(t *testing.T) {
	err := fmt.Errorf("ipvs mode: %w", ipvs.ErrIPVSUnavailable)
	if !errors.Is(err, dataplane.ErrUnavailable) || !ipvs.IsIPVSUnavailable(err) {
		t.Errorf("%v: not dataplane.ErrUnavailable", err)
	}
}

// TestConnections counts what a mode switch must let drain: the
// connections of this mode's virtual servers (service addresses on
// kube-ipvs0 and its node ports), not those of foreign ones, from a
// fresh Dataplane as a switch or a restarted agent has.
func TestConnections(t *testing.T) {
	ctx := context.Background()
	f := ipvstest.New()
	foreign(t, f)
	cfg := &switchyardv1.NodeConfig{NodeName: "n", NodeIps: []string{"10.0.0.5"}}
	if err := newDataplane(t, f, ipvs.Config{}).Apply(ctx, state(cfg, nodePortState()), dataplane.ApplyOptions{}); err != nil {
		t.Fatal(err)
	}
	fresh := newDataplane(t, f, ipvs.Config{})
	if n, err := fresh.Connections(ctx); err != nil || n != 0 {
		t.Fatalf("no traffic yet: %d connections, %v", n, err)
	}
	ep := netip.MustParseAddrPort("10.244.0.1:8080")
	for _, c := range []struct {
		vs               ipvs.VSKey
		ep               netip.AddrPort
		active, inactive int
	}{
		{ipvs.VSKey{Addr: netip.MustParseAddr("10.96.0.1"), Port: 80, Protocol: dataplane.TCP}, ep, 3, 1},
		{ipvs.VSKey{Addr: netip.MustParseAddr("10.0.0.5"), Port: 30080, Protocol: dataplane.TCP}, ep, 2, 0},
		{ipvs.VSKey{Addr: netip.MustParseAddr("192.0.2.1"), Port: 443, Protocol: dataplane.TCP}, netip.MustParseAddrPort("192.0.2.10:443"), 50, 0},
	} {
		if err := f.SetConns(c.vs, c.ep, c.active, c.inactive); err != nil {
			t.Fatal(err)
		}
	}
	if n, err := fresh.Connections(ctx); err != nil || n != 6 {
		t.Errorf("Connections = %d, %v; want 6 (service address and node port, not the foreign 50)", n, err)
	}
	if err := fresh.Cleanup(ctx); err != nil {
		t.Fatal(err)
	}
	if n, err := fresh.Connections(ctx); err != nil || n != 0 {
		t.Errorf("after Cleanup: %d connections, %v", n, err)
	}
}
