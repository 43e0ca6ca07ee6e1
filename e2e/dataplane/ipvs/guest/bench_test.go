package guest

import (
	"fmt"
	"testing"
	"time"

	"github.com/switchyard-proxy/switchyard/dataplane"
	"github.com/switchyard-proxy/switchyard/e2e/testbed/netns"
	switchyardv1 "github.com/switchyard-proxy/switchyard/proto/switchyard/v1"
)

// benchService is service i with 5 endpoints, the shape of the iptables
// mode's benchmark (e2e/dataplane/iptables); alt moves its last endpoint.
func benchService(i int, alt bool) *switchyardv1.ServiceView {
	sv := &switchyardv1.ServiceView{
		Namespace: "bench", Name: fmt.Sprintf("s%d", i), Type: switchyardv1.ServiceType_SERVICE_TYPE_CLUSTER_IP,
		ClusterIps:      []string{fmt.Sprintf("10.96.%d.%d", i/250, i%250+1)},
		Ports:           []*switchyardv1.ServicePort{{Name: "http", Protocol: switchyardv1.Protocol_PROTOCOL_TCP, Port: 80}},
		HasAnyEndpoints: true,
	}
	for e := range 5 {
		n := i*5 + e
		addr := fmt.Sprintf("10.%d.%d.%d", 128+n/62500, (n/250)%250, n%250+1)
		if alt && e == 4 {
			addr = "10.127.0.1"
		}
		sv.ClusterEndpoints = append(sv.ClusterEndpoints, &switchyardv1.Endpoint{
			Address: addr, Ready: true, Serving: true,
			Ports: []*switchyardv1.EndpointPort{{Name: "http", Port: 8080}},
		})
	}
	return sv
}

func benchState(node netns.Node, n int) *dataplane.State {
	st := &dataplane.State{
		Config: &switchyardv1.NodeConfig{NodeName: node.Name, ClusterCidrs: []string{"10.128.0.0/9"},
			NodeIps: []string{node.IP.String()}},
		Services: make(map[string]*switchyardv1.ServiceView, n),
	}
	for i := range n {
		st.Services[fmt.Sprintf("bench/s%d", i)] = benchService(i, false)
	}
	return st
}

// withMoved is st with one endpoint of service i moved.
func withMoved(st *dataplane.State, i int) *dataplane.State {
	next := &dataplane.State{Config: st.Config, Services: make(map[string]*switchyardv1.ServiceView, len(st.Services))}
	for k, v := range st.Services {
		next.Services[k] = v
	}
	next.Services[fmt.Sprintf("bench/s%d", i)] = benchService(i, true)
	return next
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
