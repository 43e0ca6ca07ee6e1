package nftables

import (
	"context"
	"fmt"
	"testing"

	"sigs.k8s.io/knftables"

	"github.com/switchyard-proxy/switchyard/dataplane"
	switchyardv1 "github.com/switchyard-proxy/switchyard/proto/switchyard/v1"
)

// discard is a knftables.Interface whose transactions do nothing, so a
// benchmark counts only the Dataplane's own work (render, validate, plan).
type discard struct{ knftables.Interface }

func (discard) Run(context.Context, *knftables.Transaction) error { return nil }

// BenchmarkApplyOneEndpoint is the agent's own CPU for a partial sync in
// which one endpoint of one service moves, at 1k/5k/10k services × 5
// endpoints; the kernel's part is in e2e/dataplane/nftables.
func BenchmarkApplyOneEndpoint(b *testing.B) { benchOneEndpoint(b, nil) }

// BenchmarkApplyOneEndpointHinted is BenchmarkApplyOneEndpoint with the
// hint the agent passes (ApplyOptions.Changed): only the moved service
// is looked at.
func BenchmarkApplyOneEndpointHinted(b *testing.B) {
	benchOneEndpoint(b, map[string]struct{}{"ns/s7": {}})
}

func benchOneEndpoint(b *testing.B, hint map[string]struct{}) {
	for _, n := range []int{1000, 5000, 10000} {
		b.Run(fmt.Sprintf("services=%d", n), func(b *testing.B) {
			dp, err := New(Config{Families: []Family{IPv4},
				Interfaces: map[Family]knftables.Interface{IPv4: discard{knftables.NewFake(knftables.IPv4Family, DefaultTable)}}})
			if err != nil {
				b.Fatal(err)
			}
			svcs := make([]*switchyardv1.ServiceView, n)
			for i := range svcs {
				svcs[i] = benchService(i, 5, false)
			}
			st := stateOf(svcs...)
			moved := stateOf(svcs...)
			moved.Services["ns/s7"] = benchService(7, 5, true)
			ctx := context.Background()
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
