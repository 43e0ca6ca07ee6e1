package nftables

import (
	"fmt"
	"testing"
	"time"

	"github.com/switchyard-proxy/switchyard/dataplane"
	"github.com/switchyard-proxy/switchyard/dataplane/nftables"
	"github.com/switchyard-proxy/switchyard/e2e/testbed/netns"
	switchyardv1 "github.com/switchyard-proxy/switchyard/proto/switchyard/v1"
)

// benchService is service i with 5 endpoints; alt moves its last one.
// The same shape as e2e/dataplane/iptables' benchmark.
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

func benchState(n int) *dataplane.State {
	st := &dataplane.State{
		Config:   &switchyardv1.NodeConfig{NodeName: "bench", ClusterCidrs: []string{"10.128.0.0/9"}},
		Services: make(map[string]*switchyardv1.ServiceView, n+1),
	}
	for i := range n {
		st.Services[fmt.Sprintf("bench/s%d", i)] = benchService(i, false)
	}
	return st
}

func withService(st *dataplane.State, sv *switchyardv1.ServiceView) *dataplane.State {
	next := &dataplane.State{Config: st.Config, Services: make(map[string]*switchyardv1.ServiceView, len(st.Services)+1)}
	for k, v := range st.Services {
		next.Services[k] = v
	}
	next.Services["bench/"+sv.Name] = sv
	return next
}

// BenchmarkSync measures syncs in a throwaway node namespace, IPv4, 5
// endpoints per service. Sub-benchmarks:
//   - full: a Full resync of an unchanged state (one transaction that
//     rewrites the table);
//   - one-endpoint: one endpoint of one service moves (partial sync);
//   - add-service: a service appears / disappears (partial sync);
//   - nft-floor: one "nft -f" of a single "add table" (what any
//     transaction costs at this table size: fork/exec plus nft's cache).
//
// The first sync into an empty table is logged.
func BenchmarkSync(b *testing.B) {
	for _, n := range []int{1000, 5000, 10000} {
		b.Run(fmt.Sprintf("services=%d", n), func(b *testing.B) { benchOne(b, n) })
	}
}

func benchOne(b *testing.B, n int) {
	netns.RequireRoot(b)
	topo, err := netns.Create(b.Context(), netns.Spec{Nodes: 1}, netns.Options{})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = topo.Close(b.Context()) })
	r := &nsRunner{topo: topo, ns: topo.Node(0).NS}
	dp, err := nftables.New(nftables.Config{Runner: r, Families: []nftables.Family{nftables.IPv4}})
	if err != nil {
		b.Fatal(err)
	}
	ctx := b.Context()
	st := benchState(n)
	start := time.Now()
	if err := dp.Apply(ctx, st, dataplane.ApplyOptions{}); err != nil {
		b.Fatal(err)
	}
	b.Logf("n=%d first sync %v wall, %v nft CPU (%d operations)", n, time.Since(start), r.takeCPU(), dp.LastSync().Operations)
	var ops int
	apply := func(b *testing.B, st *dataplane.State, full bool) {
		if err := dp.Apply(ctx, st, dataplane.ApplyOptions{Full: full}); err != nil {
			b.Fatal(err)
		}
		ops += dp.LastSync().Operations
	}
	report := func(b *testing.B) {
		b.ReportMetric(float64(ops)/float64(b.N), "nftops/op")
		b.ReportMetric(float64(r.takeCPU().Microseconds())/1000/float64(b.N), "nft-cpu-ms/op")
		ops = 0
	}
	r.takeCPU()
	b.Run("full", func(b *testing.B) {
		for b.Loop() {
			apply(b, st, true)
		}
		report(b)
	})
	moved := withService(st, benchService(n/2, true))
	b.Run("one-endpoint", func(b *testing.B) {
		i := 0
		for b.Loop() {
			if i++; i%2 == 1 {
				apply(b, moved, false)
			} else {
				apply(b, st, false)
			}
		}
		report(b)
		apply(b, st, false)
	})
	added := withService(st, benchService(n, false))
	b.Run("add-service", func(b *testing.B) {
		i := 0
		for b.Loop() {
			if i++; i%2 == 1 {
				apply(b, added, false)
			} else {
				apply(b, st, false)
			}
		}
		report(b)
		apply(b, st, false)
	})
	b.Run("nft-floor", func(b *testing.B) {
		for b.Loop() {
			if _, err := r.Run(ctx, []string{"nft", "-f", "-"}, []byte("add table ip switchyard\n")); err != nil {
				b.Fatal(err)
			}
		}
		b.ReportMetric(float64(r.takeCPU().Microseconds())/1000/float64(b.N), "nft-cpu-ms/op")
	})
}
