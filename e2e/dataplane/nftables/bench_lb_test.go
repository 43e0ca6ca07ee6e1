package nftables

import (
	"fmt"
	"net/netip"
	"runtime"
	"testing"
	"time"

	"github.com/switchyard-proxy/switchyard/dataplane"
	"github.com/switchyard-proxy/switchyard/dataplane/dataplanetest"
	"github.com/switchyard-proxy/switchyard/dataplane/nftables"
	"github.com/switchyard-proxy/switchyard/e2e/dataplane/dptest"
	switchyardv1 "github.com/switchyard-proxy/switchyard/proto/switchyard/v1"
)

// lbEndpoints is the endpoint count of BenchmarkLoadBalancing's services:
// issue 36's 10 endpoints, whose maglev table has 4,093 slots.
const lbEndpoints = 10

// lbService is service i of BenchmarkLoadBalancing: BenchService's shape
// with 10 endpoints, balanced by lb; alt replaces its last endpoint. A
// maglev service carries the table the control plane would compute.
func lbService(t testing.TB, i int, alt bool, lb switchyardv1.LoadBalancing) *switchyardv1.ServiceView {
	sv := dataplanetest.BenchService(i, false)
	sv.ClusterEndpoints = nil
	sv.LoadBalancing = lb
	var ids []string
	for e := range lbEndpoints {
		n := i*lbEndpoints + e
		addr := fmt.Sprintf("10.%d.%d.%d", 128+n/62500, (n/250)%250, n%250+1)
		if alt && e == lbEndpoints-1 {
			addr = "10.127.0.1"
		}
		sv.ClusterEndpoints = append(sv.ClusterEndpoints, &switchyardv1.Endpoint{Address: addr, Ready: true, Serving: true,
			Ports: []*switchyardv1.EndpointPort{{Name: "http", Port: dataplanetest.BenchTargetPort}}})
		ids = append(ids, netip.AddrPortFrom(netip.MustParseAddr(addr), dataplanetest.BenchTargetPort).String())
	}
	if lb != switchyardv1.LoadBalancing_LOAD_BALANCING_MAGLEV {
		return sv
	}
	mt, _ := dataplanetest.MaglevTable(t, "http", 0, ids...)
	sv.MaglevTables = []*switchyardv1.MaglevTable{mt}
	return sv
}

func lbState(t testing.TB, n int, lb switchyardv1.LoadBalancing) *dataplane.State {
	st := &dataplane.State{Config: dataplanetest.BenchConfig(), Services: make(map[string]*switchyardv1.ServiceView, n)}
	for i := range n {
		st.Services[fmt.Sprintf("bench/s%d", i)] = lbService(t, i, false, lb)
	}
	return st
}

// BenchmarkLoadBalancing compares what a maglev service costs the
// nftables mode with a random one, at 1,000 services of 10 endpoints
// each, all of one algorithm, IPv4, side by side in one run:
//   - first: the first sync into an empty table (one nft transaction),
//     measured once per iteration on a fresh table (deleted untimed);
//   - one-endpoint, one-endpoint-netlink: one endpoint of one service
//     replaced, a partial sync through nft, then through netlink. For
//     maglev that rewrites the service's table (about a fifth of its
//     4,093 slots change owner), for random one range of its map.
//
// Metrics as BenchmarkSync's (meter): nftops, nft-cpu-ms, self-cpu-ms,
// cpu-ms, tx-wall-ms; first also heap-MB, this process's live heap after
// the sync (the state included, which an agent holds too).
func BenchmarkLoadBalancing(b *testing.B) {
	const n = 1000
	for _, lb := range []switchyardv1.LoadBalancing{
		switchyardv1.LoadBalancing_LOAD_BALANCING_RANDOM,
		switchyardv1.LoadBalancing_LOAD_BALANCING_MAGLEV,
	} {
		name := map[switchyardv1.LoadBalancing]string{switchyardv1.LoadBalancing_LOAD_BALANCING_RANDOM: "random",
			switchyardv1.LoadBalancing_LOAD_BALANCING_MAGLEV: "maglev"}[lb]
		b.Run(fmt.Sprintf("services=%d/endpoints=%d/%s", n, lbEndpoints, name), func(b *testing.B) {
			benchLB(b, n, lb)
		})
	}
}

func benchLB(b *testing.B, n int, lb switchyardv1.LoadBalancing) {
	topo, r := dptest.BenchNode(b, runnerOptions)
	ns := topo.Node(0).NS
	st := lbState(b, n, lb)
	r.TakeCPU()
	b.Run("first", func(b *testing.B) {
		m := &meter{r: r}
		var heap uint64
		for b.Loop() {
			dp, err := nftables.New(nftables.Config{Runner: r, Families: []dataplane.Family{dataplane.IPv4}})
			if err != nil {
				b.Fatal(err)
			}
			m.apply(b, dp, st, true)
			b.StopTimer()
			// What the Dataplane keeps after its sync (the applied
			// ruleset and the render memo), as an agent's heap holds it.
			runtime.GC()
			var ms runtime.MemStats
			runtime.ReadMemStats(&ms)
			heap = max(heap, ms.HeapAlloc)
			runtime.KeepAlive(dp)
			if _, err := topo.Exec(b.Context(), ns, "nft", "delete", "table", "ip", nftables.DefaultTable); err != nil {
				b.Fatal(err)
			}
			r.TakeCPU() // the delete is not the sync's
			b.StartTimer()
		}
		m.report(b)
		b.ReportMetric(float64(heap)/(1<<20), "heap-MB")
	})
	alt := dptest.WithService(st, lbService(b, n/2, true, lb))
	for _, c := range []struct {
		suffix string
		cfg    nftables.Config
	}{
		{"", nftables.Config{}},
		{"-netlink", nftables.Config{PartialNetlink: nsNetlink(topo, ns)}},
	} {
		c.cfg.Runner, c.cfg.Families = r, []dataplane.Family{dataplane.IPv4}
		dp, err := nftables.New(c.cfg)
		if err != nil {
			b.Fatal(err)
		}
		start := time.Now()
		if err := dp.Apply(b.Context(), st, dataplane.ApplyOptions{Full: true}); err != nil {
			b.Fatal(err)
		}
		b.Logf("%s: full sync before the partials %v", dp.Mode(), time.Since(start))
		r.TakeCPU()
		b.Run("one-endpoint"+c.suffix, func(b *testing.B) {
			m := &meter{r: r}
			dptest.Alternate(b, st, alt, func(s *dataplane.State) { m.apply(b, dp, s, false) })
			m.report(b)
		})
		if _, err := topo.Exec(b.Context(), ns, "nft", "delete", "table", "ip", nftables.DefaultTable); err != nil {
			b.Fatal(err)
		}
		r.TakeCPU()
	}
}
