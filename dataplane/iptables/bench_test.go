package iptables_test

import (
	"fmt"
	"maps"
	"testing"

	"github.com/switchyard-proxy/switchyard/dataplane"
	"github.com/switchyard-proxy/switchyard/dataplane/dataplanetest"
	"github.com/switchyard-proxy/switchyard/dataplane/iptables"
	"github.com/switchyard-proxy/switchyard/dataplane/iptables/iptablestest"
)

// BenchmarkApplyOneEndpoint is the mode's own CPU for a partial sync in
// which one endpoint of one service moves, at 1k/5k/10k services × 5
// endpoints, over a kernel that accepts everything (the kernel's part is
// in e2e/dataplane/iptables). Successive states share every other
// service's message, as the agent's do.
func BenchmarkApplyOneEndpoint(b *testing.B) { benchOneEndpoint(b, nil) }

// BenchmarkApplyOneEndpointHinted is BenchmarkApplyOneEndpoint with the
// hint the agent passes (ApplyOptions.Changed): only the moved service
// is looked at.
func BenchmarkApplyOneEndpointHinted(b *testing.B) {
	benchOneEndpoint(b, map[string]struct{}{"bench/s7": {}})
}

func benchOneEndpoint(b *testing.B, hint map[string]struct{}) {
	for _, n := range []int{1000, 5000, 10000} {
		b.Run(fmt.Sprintf("services=%d", n), func(b *testing.B) {
			dp, err := iptables.New(iptables.Config{Runner: iptablestest.Discard{}, Families: []iptables.Family{iptables.IPv4},
				Flavour: iptables.FlavourNFT})
			if err != nil {
				b.Fatal(err)
			}
			st := dataplanetest.BenchState(n, false)
			moved := &dataplane.State{Config: st.Config, Services: maps.Clone(st.Services)}
			moved.Services["bench/s7"] = dataplanetest.BenchService(7, true)
			ctx := b.Context()
			if err := dp.Apply(ctx, st, dataplane.ApplyOptions{}); err != nil {
				b.Fatal(err)
			}
			i := 0
			for b.Loop() {
				next := st
				if i++; i%2 == 1 {
					next = moved
				}
				if err := dp.Apply(ctx, next, dataplane.ApplyOptions{Changed: hint}); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
