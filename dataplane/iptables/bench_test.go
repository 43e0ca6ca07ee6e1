package iptables_test

import (
	"testing"

	"github.com/switchyard-proxy/switchyard/dataplane"
	"github.com/switchyard-proxy/switchyard/dataplane/dataplanetest"
	"github.com/switchyard-proxy/switchyard/dataplane/iptables"
	"github.com/switchyard-proxy/switchyard/dataplane/iptables/iptablestest"
	"github.com/switchyard-proxy/switchyard/dataplane/xtables"
)

// BenchmarkApplyOneEndpoint is the mode's own CPU for a partial sync in
// which one endpoint of one service moves (dataplanetest.BenchApplyOneEndpoint),
// over a kernel that accepts everything (the kernel's part is in
// e2e/dataplane/iptables).
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
	dp, err := iptables.New(iptables.Config{Runner: iptablestest.Discard{}, Families: []dataplane.Family{dataplane.IPv4},
		Flavour: xtables.FlavourNFT})
	if err != nil {
		b.Fatal(err)
	}
	return dp
}
