package nftables

import (
	"fmt"
	"testing"

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
// self-cpu-us/op is this process's user+system time during the checks:
// the kernel's dump work runs in the reading thread, so it is counted
// (dptest.BenchCheckDrift).
func BenchmarkCheckDrift(b *testing.B) {
	for _, n := range []int{1000, 5000} {
		b.Run(fmt.Sprintf("services=%d", n), func(b *testing.B) {
			topo, r := dptest.BenchNode(b, runnerOptions)
			ns := topo.Node(0).NS
			dp, err := nftables.New(nftables.Config{Runner: r, Families: []dataplane.Family{dataplane.IPv4}, PartialNetlink: nsNetlink(topo, ns)})
			if err != nil {
				b.Fatal(err)
			}
			dptest.BenchCheckDrift(b, r, dp, n, false, func(b *testing.B, i int) {
				if _, err := r.Run(b.Context(), []string{"nft", "add", "table", "ip", fmt.Sprintf("someone%d", i)}, nil); err != nil {
					b.Fatal(err)
				}
			})
		})
	}
}
