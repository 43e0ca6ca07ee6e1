package nftables

import (
	"context"
	"testing"

	"sigs.k8s.io/knftables"

	"github.com/switchyard-proxy/switchyard/dataplane"
	"github.com/switchyard-proxy/switchyard/dataplane/dataplanetest"
)

// discard is a knftables.Interface whose transactions do nothing, so a
// benchmark counts only the Dataplane's own work (render, validate, plan).
type discard struct{ knftables.Interface }

func (discard) Run(context.Context, *knftables.Transaction) error { return nil }

// BenchmarkApplyOneEndpoint is the agent's own CPU for a partial sync in
// which one endpoint of one service moves (dataplanetest.BenchApplyOneEndpoint);
// the kernel's part is in e2e/dataplane/nftables.
func BenchmarkApplyOneEndpoint(b *testing.B) {
	dataplanetest.BenchApplyOneEndpoint(b, newBenchDataplane, false)
}

// BenchmarkApplyOneEndpointHinted is BenchmarkApplyOneEndpoint with the
// hint the agent passes (ApplyOptions.Changed): only the moved service
// is looked at.
func BenchmarkApplyOneEndpointHinted(b *testing.B) {
	dataplanetest.BenchApplyOneEndpoint(b, newBenchDataplane, true)
}

func newBenchDataplane(b *testing.B) dataplane.Dataplane {
	dp, err := New(Config{Families: []dataplane.Family{dataplane.IPv4},
		Interfaces: map[dataplane.Family]knftables.Interface{dataplane.IPv4: discard{knftables.NewFake(knftables.IPv4Family, DefaultTable)}}})
	if err != nil {
		b.Fatal(err)
	}
	return dp
}
