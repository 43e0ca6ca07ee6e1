package nodeview

import (
	"fmt"
	"testing"

	"github.com/switchyard-proxy/switchyard/controlplane/internal/cache"
	"github.com/switchyard-proxy/switchyard/controlplane/internal/model"
)

// BenchmarkNewIndex is the full recompute an Update replaces: every
// service of benchSpec, no node view.
func BenchmarkNewIndex(b *testing.B) {
	st := genState(benchSpec)
	loopCPU(b, func() { sink = NewIndex(st, Options{}) })
}

// togglingService returns the key of service i of benchSpec and a function
// that flips the readiness of its first endpoint in st, as an
// EndpointSlice update would.
func togglingService(st *model.State, i int) (model.ServiceKey, func()) {
	svc, slice := genService(benchSpec, i)
	alt := *slice
	alt.Endpoints = append([]model.Endpoint(nil), slice.Endpoints...)
	alt.Endpoints[0].Ready = false
	versions := [2]*model.EndpointSlice{&alt, slice}
	n := 0
	return svc.Key, func() {
		st.Slices[svc.Key][slice.Key] = versions[n%2]
		n++
	}
}

// BenchmarkUpdateOneService: one EndpointSlice event at benchSpec's scale
// (10k services × 10 endpoints, 1,000 nodes), for each kind of service.
func BenchmarkUpdateOneService(b *testing.B) {
	st := genState(benchSpec)
	base := NewIndex(st, Options{})
	for _, bc := range []struct {
		name string
		i    int // service index in benchSpec: see genService
	}{
		{name: "plain", i: 3},
		{name: "zone-hinted", i: 2},
		{name: "etp-local", i: 10},
		{name: "itp-local", i: 21},
	} {
		b.Run(bc.name, func(b *testing.B) {
			k, toggle := togglingService(st, bc.i)
			ix := base
			b.ReportAllocs()
			for b.Loop() {
				toggle()
				ix, _ = ix.Update(st, []model.ServiceKey{k}, nil)
			}
			sink = ix
		})
	}
}

// BenchmarkUpdateNodeZone: a node moves between two zones: the services
// reading it are recomputed and the zone layers it leaves and joins are
// compared.
func BenchmarkUpdateNodeZone(b *testing.B) {
	st := genState(benchSpec)
	ix := NewIndex(st, Options{})
	name := genNodeName(7)
	nodes := [2]*model.Node{{Name: name, Zone: "zone-1"}, st.Nodes[name]}
	b.ReportAllocs()
	n := 0
	for b.Loop() {
		st.Nodes[name] = nodes[n%2]
		n++
		ix, _ = ix.Update(st, nil, []string{name})
	}
	sink = ix
}

// BenchmarkUpdatePublish is the watch loop's work for one event: Update,
// then for every node the changed names and a new NodeView.
func BenchmarkUpdatePublish(b *testing.B) {
	st := genState(benchSpec)
	ix := NewIndex(st, Options{})
	k, toggle := togglingService(st, 3)
	nodes := make([]string, benchSpec.nodes)
	for i := range nodes {
		nodes[i] = genNodeName(i)
	}
	b.ReportAllocs()
	for b.Loop() {
		toggle()
		var ch Changes
		ix, ch = ix.Update(st, []model.ServiceKey{k}, nil)
		for _, n := range nodes {
			nv := ix.Node(n)
			sink = ch.ForNode(n, nv.Zone())
		}
	}
}

// BenchmarkSpliceDefaults isolates the one O(services) step of an Update:
// copying the sorted default set (pointers only) with one entry replaced.
func BenchmarkSpliceDefaults(b *testing.B) {
	for _, n := range []int{1000, 10000, 100000} {
		b.Run(fmt.Sprintf("services=%d", n), func(b *testing.B) {
			svcs := make([]*ServiceViews, n)
			for i := range svcs {
				k := model.ServiceKey{Namespace: "ns", Name: fmt.Sprintf("svc-%06d", i)}
				svcs[i] = &ServiceViews{Key: k, Default: &View{View: cache.View{Name: k.String()}}}
			}
			mid := svcs[n/2]
			edits := []svcEdit{{name: mid.Default.Name, key: mid.Key, old: mid, new: mid}}
			b.ReportAllocs()
			for b.Loop() {
				sink = splice(svcs, edits, compareToEdit, func(e svcEdit) (*ServiceViews, bool) { return e.new, true })
			}
		})
	}
}
