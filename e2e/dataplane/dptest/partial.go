package dptest

import (
	"fmt"
	"slices"

	"github.com/switchyard-proxy/switchyard/e2e/testbed/netns"
	switchyardv1 "github.com/switchyard-proxy/switchyard/proto/switchyard/v1"
)

// ManyServices returns n services "s<i>" on cluster IPs 10.96.1.<i+1>,
// port 80, over pods: the state a partial-sync test changes one service
// of.
func ManyServices(n int, pods ...netns.Pod) []*switchyardv1.ServiceView {
	svcs := make([]*switchyardv1.ServiceView, 0, n)
	for i := range n {
		svcs = append(svcs, Service(fmt.Sprintf("s%d", i), fmt.Sprintf("10.96.1.%d", i+1), 80, 0, pods...))
	}
	return svcs
}

// Changed returns, sorted, the names whose text differs between two
// read-backs of the kernel (name → text: chains, sets, maps) or that
// only one of them holds: what a sync changed.
func Changed(before, after map[string]string) []string {
	var out []string
	for n, text := range before {
		if a, ok := after[n]; !ok || a != text {
			out = append(out, n)
		}
	}
	for n := range after {
		if _, ok := before[n]; !ok {
			out = append(out, n)
		}
	}
	slices.Sort(out)
	return out
}
