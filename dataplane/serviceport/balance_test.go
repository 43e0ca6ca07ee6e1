package serviceport_test

import (
	"fmt"
	"net/netip"
	"strings"
	"testing"

	"github.com/switchyard-proxy/switchyard/dataplane"
	"github.com/switchyard-proxy/switchyard/dataplane/dataplanetest"
	"github.com/switchyard-proxy/switchyard/dataplane/maglev"
	"github.com/switchyard-proxy/switchyard/dataplane/serviceport"
	switchyardv1 "github.com/switchyard-proxy/switchyard/proto/switchyard/v1"
)

// maglevTable is the table the control plane would send for eps.
func maglevTable(t *testing.T, port string, ipv6 bool, eps ...string) *switchyardv1.MaglevTable {
	t.Helper()
	mt, _ := dataplanetest.MaglevTable(t, port, 0, eps...)
	mt.Ipv6 = ipv6
	return mt
}

// TestReadBalance checks how a port reads its algorithm and tables: a
// table whose string order differs from the set's address order is
// re-indexed (10.244.0.10 sorts before 10.244.0.9 as text), so Pick
// names the endpoint Table.Lookup names; a table missing or disagreeing
// with the set leaves the port random, reported.
func TestReadBalance(t *testing.T) {
	eps4 := []string{"10.244.0.9:8080", "10.244.0.10:8080", "10.244.0.2:8080"}
	view := func(lb switchyardv1.LoadBalancing, tables ...*switchyardv1.MaglevTable) *switchyardv1.ServiceView {
		sv := &switchyardv1.ServiceView{
			Namespace: "ns", Name: "web", ClusterIps: []string{"10.96.0.1", "fd00::1"},
			Ports:         []*switchyardv1.ServicePort{{Name: "http", Protocol: switchyardv1.Protocol_PROTOCOL_TCP, Port: 80}},
			LoadBalancing: lb, MaglevTables: tables,
		}
		for _, a := range []string{"10.244.0.9", "10.244.0.10", "10.244.0.2", "fd00::9"} {
			sv.ClusterEndpoints = append(sv.ClusterEndpoints, &switchyardv1.Endpoint{Address: a,
				Ports: []*switchyardv1.EndpointPort{{Name: "http", Port: 8080}}})
		}
		return sv
	}
	maglevLB, sh := switchyardv1.LoadBalancing_LOAD_BALANCING_MAGLEV, switchyardv1.LoadBalancing_LOAD_BALANCING_SOURCE_HASH
	good4, good6 := maglevTable(t, "http", false, eps4...), maglevTable(t, "http", true, "[fd00::9]:8080")
	for _, tc := range []struct {
		name     string
		sv       *switchyardv1.ServiceView
		fam      dataplane.Family
		want     serviceport.Algorithm
		wantSkip string
	}{
		{name: "unspecified", sv: view(0), fam: dataplane.IPv4, want: serviceport.ModeDefault},
		{name: "round-robin needs no table", sv: view(switchyardv1.LoadBalancing_LOAD_BALANCING_ROUND_ROBIN), fam: dataplane.IPv4, want: serviceport.RoundRobin},
		{name: "maglev IPv4", sv: view(maglevLB, good6, good4), fam: dataplane.IPv4, want: serviceport.Maglev},
		{name: "maglev IPv6", sv: view(maglevLB, good4, good6), fam: dataplane.IPv6, want: serviceport.Maglev},
		{name: "source-hash", sv: view(sh, good4), fam: dataplane.IPv4, want: serviceport.SourceHash},
		{name: "no table for the family", sv: view(maglevLB, good4), fam: dataplane.IPv6, want: serviceport.Random, wantSkip: "no IPv6 cluster table"},
		{name: "an endpoint missing", sv: view(maglevLB, maglevTable(t, "http", false, eps4[:2]...)), fam: dataplane.IPv4, want: serviceport.Random, wantSkip: "lists 2 endpoints, the set has 3"},
		{name: "another endpoint", sv: view(maglevLB, maglevTable(t, "http", false, "10.244.0.9:8080", "10.244.0.10:8080", "10.244.0.7:8080")), fam: dataplane.IPv4, want: serviceport.Random, wantSkip: `"10.244.0.7:8080" is not in the set`},
		{name: "another port's table", sv: view(maglevLB, maglevTable(t, "dns", false, eps4...)), fam: dataplane.IPv4, want: serviceport.Random, wantSkip: "no IPv4 cluster table"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var skips []string
			svc, ok := serviceport.Read("ns/web", tc.sv, tc.fam, func(_, reason string) { skips = append(skips, reason) })
			if !ok || len(svc.Ports) != 1 {
				t.Fatalf("Read: ok %v, %d ports", ok, len(svc.Ports))
			}
			p := svc.Ports[0]
			if p.Algorithm != tc.want {
				t.Errorf("algorithm %v, want %v", p.Algorithm, tc.want)
			}
			if got := strings.Join(skips, "; "); (tc.wantSkip == "") != (got == "") || !strings.Contains(got, tc.wantSkip) {
				t.Errorf("skips %q, want one containing %q", got, tc.wantSkip)
			}
			if !p.Algorithm.Hashed() {
				if p.ClusterTable != nil {
					t.Errorf("a %v port has a table", p.Algorithm)
				}
				return
			}
			// Every agent must pick what the control plane's table
			// says: compare Pick with Lookup over many clients.
			mt := good4
			if tc.fam == dataplane.IPv6 {
				mt = good6
			}
			tab := maglev.Table{Backends: mt.Endpoints}
			for _, s := range mt.Slots {
				tab.Slots = append(tab.Slots, uint16(s))
			}
			for i := range 500 {
				src := netip.AddrPortFrom(netip.MustParseAddr(fmt.Sprintf("192.0.2.%d", i%250)), uint16(30000+i))
				if tc.fam == dataplane.IPv6 {
					src = netip.AddrPortFrom(netip.MustParseAddr(fmt.Sprintf("2001:db8::%x", i)), uint16(30000+i))
				}
				key := maglev.FlowKey(src.Addr(), src.Port())
				if p.Algorithm == serviceport.SourceHash {
					key = maglev.AddrKey(src.Addr())
				}
				want := tab.Lookup(key, mt.Seed)
				if got := p.Cluster[p.ClusterTable.Pick(p.Algorithm, src)].Addr.String(); got != want {
					t.Fatalf("client %v: Pick %s, the table %s", src, got, want)
				}
			}
		})
	}
}
