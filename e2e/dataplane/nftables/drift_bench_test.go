package nftables

import (
	"fmt"
	"testing"
	"time"

	"github.com/switchyard-proxy/switchyard/dataplane"
	"github.com/switchyard-proxy/switchyard/dataplane/nftables"
	"github.com/switchyard-proxy/switchyard/e2e/dataplane/dptest"
)

// BenchmarkCheckDrift measures CheckDrift in a throwaway node namespace,
// IPv4, 5 endpoints per service (dptest.BenchState):
//   - unchanged: the generation equals the baseline (one netlink
//     exchange);
//   - foreign-change: another table changed before each check (not
//     timed), so the check reads our table back over netlink and
//     compares it with what was applied, and finds nothing.
//
// cpu-us/op is this process's user+system time during the checks: the
// kernel's dump work runs in the reading thread, so it is counted.
func BenchmarkCheckDrift(b *testing.B) {
	for _, n := range []int{1000, 5000} {
		b.Run(fmt.Sprintf("services=%d", n), func(b *testing.B) {
			topo, r := dptest.BenchNode(b, runnerOptions)
			ns := topo.Node(0).NS
			dp, err := nftables.New(nftables.Config{Runner: r, Families: []dataplane.Family{dataplane.IPv4}, PartialNetlink: nsNetlink(topo, ns)})
			if err != nil {
				b.Fatal(err)
			}
			if err := dp.Apply(b.Context(), dptest.BenchState(n, false), dataplane.ApplyOptions{}); err != nil {
				b.Fatal(err)
			}
			if _, err := dp.CheckDrift(b.Context()); err != nil { // sets the baseline
				b.Fatal(err)
			}
			foreign := 0
			for _, tc := range []struct {
				name     string
				readBack bool
			}{{"unchanged", false}, {"foreign-change", true}} {
				b.Run(tc.name, func(b *testing.B) {
					var cpu, wall time.Duration
					for i := 0; i < b.N; i++ {
						if tc.readBack {
							b.StopTimer()
							foreign++
							if _, err := r.Run(b.Context(), []string{"nft", "add", "table", "ip", fmt.Sprintf("someone%d", foreign)}, nil); err != nil {
								b.Fatal(err)
							}
							b.StartTimer()
						}
						c0, t0 := dptest.SelfCPU(), time.Now()
						dr, err := dp.CheckDrift(b.Context())
						wall += time.Since(t0)
						cpu += dptest.SelfCPU() - c0
						if err != nil || dr.Drifted() || dr.ReadBack != tc.readBack {
							b.Fatalf("%+v %v", dr, err)
						}
					}
					b.ReportMetric(float64(cpu.Microseconds())/float64(b.N), "cpu-us/op")
					b.ReportMetric(float64(wall.Microseconds())/float64(b.N), "wall-us/op")
				})
			}
		})
	}
}
