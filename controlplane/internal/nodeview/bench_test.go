package nodeview

import (
	"runtime"
	"testing"

	"github.com/switchyard-proxy/switchyard/controlplane/internal/model"
)

// benchSpec is the scale of the brief: 1,000 nodes in 10 zones, 10,000
// services of 10 endpoints; one service in 10 is a LoadBalancer with
// externalTrafficPolicy Local, one in 10 has zone hints, one in 20 has
// internalTrafficPolicy Local.
var benchSpec = genSpec{services: 10000, endpoints: 10, nodes: 1000, zones: 10, localEvery: 10, hintedEvery: 10, itpLocalEach: 20}

// sink keeps results alive so the compiler cannot drop the work.
var sink any

// BenchmarkCompute measures a full recompute: every service's views and
// every node's NodeView.
func BenchmarkCompute(b *testing.B) { benchCompute(b, Options{}) }

// BenchmarkComputeSerial is BenchmarkCompute on one worker.
func BenchmarkComputeSerial(b *testing.B) { benchCompute(b, Options{Workers: 1}) }

func benchCompute(b *testing.B, opts Options) {
	st := genState(benchSpec)
	nodes := make([]string, benchSpec.nodes)
	for i := range nodes {
		nodes[i] = genNodeName(i)
	}
	loopCPU(b, func() {
		ix := NewIndex(st, opts)
		views := make([]*NodeView, len(nodes))
		for i, n := range nodes {
			views[i] = ix.Node(n)
		}
		sink = views
	})
}

// loopCPU runs op in a benchmark loop, reporting allocations and the CPU
// time (all threads, GC included) per operation.
func loopCPU(b *testing.B, op func()) {
	b.ReportAllocs()
	b.ResetTimer()
	start := cpuTime()
	for b.Loop() {
		op()
	}
	if end := cpuTime(); start >= 0 && end >= 0 {
		b.ReportMetric(float64(end-start)/float64(b.N), "cpu-ns/op")
	}
}

// BenchmarkNode measures one node's view from a built Index.
func BenchmarkNode(b *testing.B) {
	ix := NewIndex(genState(benchSpec), Options{})
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		sink = ix.Node(genNodeName(i % benchSpec.nodes))
		i++
	}
}

// BenchmarkRetained reports the heap retained by an Index plus the
// NodeViews of 1 node and of 1,000 nodes when no service has a Local
// policy or hints: the shared views must dominate.
func BenchmarkRetained(b *testing.B) {
	g := benchSpec
	g.localEvery, g.hintedEvery, g.itpLocalEach = 0, 0, 0
	st := genState(g)
	var one, all uint64
	for b.Loop() {
		one = retainedBytes(st, 1)
		all = retainedBytes(st, g.nodes)
	}
	b.ReportMetric(float64(one), "retained-B/1node")
	b.ReportMetric(float64(all), "retained-B/1000nodes")
	b.ReportMetric(float64(all)/float64(one), "ratio")
}

func TestRetainedMemoryShared(t *testing.T) {
	if testing.Short() {
		t.Skip("builds 1,000 node views")
	}
	g := genSpec{services: 2000, endpoints: 10, nodes: 1000, zones: 10}
	st := genState(g)
	one := retainedBytes(st, 1)
	all := retainedBytes(st, g.nodes)
	ratio := float64(all) / float64(one)
	t.Logf("retained: 1 node %d B, %d nodes %d B, ratio %.3f", one, g.nodes, all, ratio)
	if ratio > 1.2 {
		t.Errorf("retained bytes for %d nodes are %.2f× those for 1 node, want ≤ 1.2", g.nodes, ratio)
	}
}

// retainedBytes builds an Index over st and keeps the NodeViews of n
// nodes, and returns the live heap they hold after a full GC.
func retainedBytes(st *model.State, n int) uint64 {
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	ix := NewIndex(st, Options{})
	views := make([]*NodeView, n)
	for i := range views {
		views[i] = ix.Node(genNodeName(i))
	}
	runtime.GC()
	runtime.ReadMemStats(&after)
	runtime.KeepAlive(ix)
	runtime.KeepAlive(views)
	if after.HeapAlloc < before.HeapAlloc {
		return 0
	}
	return after.HeapAlloc - before.HeapAlloc
}

// BenchmarkComputeLoadBalancing prices maglev tables in the control
// plane: a full recompute of 1,000 services of 10 endpoints on 1,000
// nodes (benchSpec's mix otherwise), all random, then all maglev (one
// 4,093-slot table per port, set and family, in every variant).
func BenchmarkComputeLoadBalancing(b *testing.B) {
	spec := benchSpec
	spec.services = 1000
	st := genState(spec)
	for _, lb := range []string{"random", "maglev"} {
		b.Run(lb, func(b *testing.B) {
			loopCPU(b, func() { sink = NewIndex(st, Options{Defaults: Defaults{LoadBalancing: lb}}) })
		})
	}
}
