package guest

import (
	"fmt"
	"testing"
	"time"

	"github.com/switchyard-proxy/switchyard/e2e/dataplane/dptest"

	"github.com/switchyard-proxy/switchyard/dataplane"
	"github.com/switchyard-proxy/switchyard/e2e/testbed/netns"
	switchyardv1 "github.com/switchyard-proxy/switchyard/proto/switchyard/v1"
)

// benchState is dptest's benchmark workload (the same shape as the other
// modes' benchmarks) on node.
func benchState(node netns.Node, n int) *dataplane.State {
	st := dptest.BenchState(n, false)
	st.Config = &switchyardv1.NodeConfig{NodeName: node.Name, ClusterCidrs: []string{"10.128.0.0/9"},
		NodeIps: []string{node.IP.String()}}
	return st
}

// withMoved is st with one endpoint of service i moved.
func withMoved(st *dataplane.State, i int) *dataplane.State {
	return dptest.WithService(st, dptest.BenchService(i, true))
}

// BenchmarkApply programs services × 5 endpoints in a node namespace of
// the guest. Sub-benchmarks:
//   - first: a new Dataplane on an empty node (read-back of nothing, then
//     every virtual server, real server, address and set member);
//   - one-endpoint: one endpoint of one service moves (incremental Apply);
//   - no-change: the same state again (render and compare only, no kernel
//     call: the CPU part of every Apply);
//   - full-resync: Apply with Full of the unchanged state (read everything
//     back, change nothing);
//   - restart: a new Dataplane's first Apply on the populated node;
//   - cleanup: remove everything.
func BenchmarkApply(b *testing.B) {
	for _, n := range []int{1000, 5000} {
		b.Run(fmt.Sprintf("services=%d", n), func(b *testing.B) { benchApply(b, n) })
	}
}

func benchApply(b *testing.B, n int) {
	bd := useBed(b)
	st := benchState(bd.node, n)
	moved := withMoved(st, n/2)
	a := bd.newAgent(b, nil)
	timed := func(b *testing.B, what string, fn func()) {
		start := time.Now()
		fn()
		b.Logf("services=%d %s: %v, %+v", n, what, time.Since(start).Round(time.Millisecond), a.dp.LastSync())
	}

	b.Run("first", func(b *testing.B) {
		for b.Loop() {
			b.StopTimer()
			if err := a.dp.Cleanup(b.Context()); err != nil {
				b.Fatal(err)
			}
			a = a.restarted(b, bd)
			b.StartTimer()
			timed(b, "first apply", func() { a.apply(b, st, false) })
		}
	})
	b.Run("one-endpoint", func(b *testing.B) {
		i := 0
		for b.Loop() {
			next := st
			if i++; i%2 == 1 {
				next = moved
			}
			timed(b, "one-endpoint change", func() { a.apply(b, next, false) })
		}
		a.apply(b, st, false)
	})
	b.Run("no-change", func(b *testing.B) {
		for b.Loop() {
			timed(b, "unchanged state", func() { a.apply(b, st, false) })
		}
	})
	b.Run("full-resync", func(b *testing.B) {
		for b.Loop() {
			timed(b, "full resync", func() { a.apply(b, st, true) })
		}
	})
	b.Run("restart", func(b *testing.B) {
		for b.Loop() {
			b.StopTimer()
			a = a.restarted(b, bd)
			b.StartTimer()
			timed(b, "restart apply", func() { a.apply(b, st, false) })
		}
	})
	b.Run("cleanup", func(b *testing.B) {
		for b.Loop() {
			b.StopTimer()
			a.apply(b, st, false)
			b.StartTimer()
			timed(b, "cleanup", func() {
				if err := a.dp.Cleanup(b.Context()); err != nil {
					b.Fatal(err)
				}
			})
		}
	})
	if vss, err := a.k.VirtualServers(b.Context()); err != nil || len(vss) != 0 {
		b.Errorf("after cleanup: %d virtual servers (%v)", len(vss), err)
	}
}
