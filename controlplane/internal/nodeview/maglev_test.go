package nodeview

import (
	"fmt"
	"testing"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/protobuf/testing/protocmp"

	"github.com/switchyard-proxy/switchyard/controlplane/internal/model"
	"github.com/switchyard-proxy/switchyard/dataplane/maglev"
	switchyardv1 "github.com/switchyard-proxy/switchyard/proto/switchyard/v1"
)

// wantTable is the table maglev.New builds for eps ("addr:port"), as the
// view must carry it.
func wantTable(t *testing.T, port string, local, ipv6 bool, eps ...string) *switchyardv1.MaglevTable {
	t.Helper()
	tab, err := maglev.New(eps, maglev.Size(len(eps)))
	if err != nil {
		t.Fatal(err)
	}
	mt := &switchyardv1.MaglevTable{PortName: port, Local: local, Ipv6: ipv6, Seed: maglev.Seed, Endpoints: tab.Backends}
	for _, s := range tab.Slots {
		mt.Slots = append(mt.Slots, uint32(s))
	}
	return mt
}

func withLoadBalancing(name string) svcOpt {
	return func(s *model.Service) { s.LoadBalancing = name }
}

// TestMaglevTables checks the tables a view carries: one per service
// port, set and family with endpoints, each the one maglev.New builds
// from the endpoints' address:targetPort, and none for other algorithms.
func TestMaglevTables(t *testing.T) {
	ports := []model.EndpointPort{slicePort("http", 8080), slicePort("admin", 9090)}
	v4 := newSlice("web", "web-v4", ports,
		newEP("10.0.0.1", "n1", "a"), newEP("10.0.0.2", "n2", "a"), newEP("10.0.0.3", "n2", "a"))
	v6 := newSlice("web", "web-v6", ports[:1], newEP("fd00::1", "n1", "a"), newEP("fd00::2", "n2", "a"))
	twoPorts := withPorts(tcp("http", 80), tcp("admin", 90))
	dual := withClusterIPs("10.96.0.10", "fd00:96::10")
	for _, tc := range []struct {
		name    string
		svc     *model.Service
		balance string // the Index's default
		node    string // the node whose view is checked; "" the default view
		wantLB  switchyardv1.LoadBalancing
		want    []*switchyardv1.MaglevTable
	}{
		{
			name: "maglev: every port and family", svc: newSvc("web", twoPorts, dual, withLoadBalancing("maglev")),
			wantLB: switchyardv1.LoadBalancing_LOAD_BALANCING_MAGLEV,
			want: []*switchyardv1.MaglevTable{
				wantTable(t, "http", false, false, "10.0.0.1:8080", "10.0.0.2:8080", "10.0.0.3:8080"),
				wantTable(t, "http", false, true, "[fd00::1]:8080", "[fd00::2]:8080"),
				wantTable(t, "admin", false, false, "10.0.0.1:9090", "10.0.0.2:9090", "10.0.0.3:9090"),
			},
		},
		{
			name: "source-hash: the same tables", svc: newSvc("web", withPorts(tcp("http", 80)), withLoadBalancing("source-hash")),
			wantLB: switchyardv1.LoadBalancing_LOAD_BALANCING_SOURCE_HASH,
			want: []*switchyardv1.MaglevTable{
				wantTable(t, "http", false, false, "10.0.0.1:8080", "10.0.0.2:8080", "10.0.0.3:8080"),
			},
		},
		{
			name: "the cluster default applies without an annotation", svc: newSvc("web", withPorts(tcp("http", 80))), balance: "maglev",
			wantLB: switchyardv1.LoadBalancing_LOAD_BALANCING_MAGLEV,
			want: []*switchyardv1.MaglevTable{
				wantTable(t, "http", false, false, "10.0.0.1:8080", "10.0.0.2:8080", "10.0.0.3:8080"),
			},
		},
		{
			name: "the annotation wins over the default", svc: newSvc("web", withLoadBalancing("round-robin")), balance: "maglev",
			wantLB: switchyardv1.LoadBalancing_LOAD_BALANCING_ROUND_ROBIN,
		},
		{
			name:   "neither: each mode's default",
			svc:    newSvc("web"),
			wantLB: switchyardv1.LoadBalancing_LOAD_BALANCING_UNSPECIFIED,
		},
		{
			name: "Local policy: the node's own table beside the cluster's", node: "n2",
			svc:    newSvc("web", withPorts(tcp("http", 80)), withETPLocal(32000), withLoadBalancing("maglev")),
			wantLB: switchyardv1.LoadBalancing_LOAD_BALANCING_MAGLEV,
			want: []*switchyardv1.MaglevTable{
				wantTable(t, "http", false, false, "10.0.0.1:8080", "10.0.0.2:8080", "10.0.0.3:8080"),
				wantTable(t, "http", true, false, "10.0.0.2:8080", "10.0.0.3:8080"),
			},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st := model.NewState()
			st.Services[tc.svc.Key] = tc.svc
			st.Slices[tc.svc.Key] = slicesOf(v4, v6)
			st.Nodes = nodesOf("n1@a", "n2@a")
			ix := NewIndex(st, Options{Defaults: Defaults{LoadBalancing: tc.balance}})
			views := ix.Service(tc.svc.Key)
			v := views.Default
			if tc.node != "" {
				v = views.For(st.Nodes[tc.node])
			}
			sv := mustView(t, v)
			if sv.GetLoadBalancing() != tc.wantLB {
				t.Errorf("load_balancing %v, want %v", sv.GetLoadBalancing(), tc.wantLB)
			}
			if diff := cmp.Diff(tc.want, sv.GetMaglevTables(), protocmp.Transform()); diff != "" {
				t.Errorf("tables (-want +got):\n%s", diff)
			}
		})
	}
}

// TestWithLoadBalancing: a new cluster default reaches every service
// without an annotation once the next Update lists them all (as the
// watcher does), and only those.
func TestWithLoadBalancing(t *testing.T) {
	st := model.NewState()
	for i, lb := range []string{"", "random"} {
		svc := newSvc(fmt.Sprintf("s%d", i), withLoadBalancing(lb))
		st.Services[svc.Key] = svc
		st.Slices[svc.Key] = slicesOf(newSlice(svc.Key.Name, svc.Key.Name+"-x", httpPort, newEP("10.0.0.1", "n1", "a")))
	}
	ix := NewIndex(st, Options{})
	next := ix.WithLoadBalancing("maglev")
	if next.LoadBalancing() != "maglev" || ix.LoadBalancing() != "" {
		t.Fatalf("defaults: next %q, old %q", next.LoadBalancing(), ix.LoadBalancing())
	}
	if ix.WithLoadBalancing("") != ix {
		t.Errorf("the same default made a new Index")
	}
	var keys []model.ServiceKey
	for k := range st.Services {
		keys = append(keys, k)
	}
	next, ch := next.Update(st, keys, nil)
	if diff := cmp.Diff([]string{"ns/s0"}, ch.Names); diff != "" {
		t.Errorf("changed services (-want +got):\n%s", diff)
	}
	s0 := mustView(t, next.Service(model.ServiceKey{Namespace: "ns", Name: "s0"}).Default)
	if s0.GetLoadBalancing() != switchyardv1.LoadBalancing_LOAD_BALANCING_MAGLEV || len(s0.GetMaglevTables()) != 1 {
		t.Errorf("s0: %v with %d tables, want MAGLEV with 1", s0.GetLoadBalancing(), len(s0.GetMaglevTables()))
	}
}
