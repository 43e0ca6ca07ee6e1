package syncer

import (
	"context"
	"fmt"
	"testing"

	"sigs.k8s.io/knftables"

	"github.com/switchyard-proxy/switchyard/dataplane"
	"github.com/switchyard-proxy/switchyard/dataplane/dataplanetest"
	"github.com/switchyard-proxy/switchyard/dataplane/iptables"
	"github.com/switchyard-proxy/switchyard/dataplane/iptables/iptablestest"
	"github.com/switchyard-proxy/switchyard/dataplane/nftables"
	"github.com/switchyard-proxy/switchyard/dataplane/xtables"
	"github.com/switchyard-proxy/switchyard/nodeagent/internal/healthcheck"
	"github.com/switchyard-proxy/switchyard/nodeagent/internal/persist"
	"github.com/switchyard-proxy/switchyard/nodeagent/internal/runtest"
	"github.com/switchyard-proxy/switchyard/nodeagent/internal/view"
	switchyardv1 "github.com/switchyard-proxy/switchyard/proto/switchyard/v1"
)

// nftDiscard is an nft whose transactions do nothing: the benchmark
// counts the agent's work, not a fake kernel's.
type nftDiscard struct{ knftables.Interface }

func (nftDiscard) Run(context.Context, *knftables.Transaction) error { return nil }

// noKernel is a mode that programs nothing: what the agent spends around
// the dataplane (merging the update, the state file, the callbacks).
type noKernel struct{}

func (noKernel) Mode() string                                                          { return "none" }
func (noKernel) Apply(context.Context, *dataplane.State, dataplane.ApplyOptions) error { return nil }
func (noKernel) Cleanup(context.Context) error                                         { return nil }

// BenchmarkSyncerApplyOneEndpoint is the agent's apply path for an update
// that moves one endpoint of one service among n (× 5 endpoints): the
// Syncer's Apply as discovery calls it, through the real iptables or
// nftables mode over a kernel that accepts everything, with the state
// file fsynced in a temporary directory (the pending record and the
// saved view) and the health-check bookkeeping the agent does after
// each sync.
// "none" is the same without a mode.
func BenchmarkSyncerApplyOneEndpoint(b *testing.B) {
	modes := map[string]func() (dataplane.Dataplane, error){
		"none": func() (dataplane.Dataplane, error) { return noKernel{}, nil },
		"iptables": func() (dataplane.Dataplane, error) {
			return iptables.New(iptables.Config{Runner: iptablestest.Discard{}, Families: []dataplane.Family{dataplane.IPv4},
				Flavour: xtables.FlavourNFT})
		},
		"nftables": func() (dataplane.Dataplane, error) {
			return nftables.New(nftables.Config{Families: []dataplane.Family{dataplane.IPv4},
				Interfaces: map[dataplane.Family]knftables.Interface{
					dataplane.IPv4: nftDiscard{knftables.NewFake(knftables.IPv4Family, nftables.DefaultTable)}}})
		},
	}
	for _, mode := range []string{"none", "iptables", "nftables"} {
		for _, n := range []int{1000, 5000, 10000} {
			b.Run(fmt.Sprintf("mode=%s/services=%d", mode, n), func(b *testing.B) {
				benchSyncer(b, modes[mode], n)
			})
		}
	}
}

func benchSyncer(b *testing.B, build func() (dataplane.Dataplane, error), n int) {
	var hc healthcheck.Index
	store, err := persist.New(b.TempDir(), "bench")
	if err != nil {
		b.Fatal(err)
	}
	s, err := New(Config{
		Mode:         switchyardv1.DataplaneMode_DATAPLANE_MODE_IPTABLES,
		NewDataplane: func(switchyardv1.DataplaneMode) (dataplane.Dataplane, error) { return build() },
		Journal:      store,
		// What the agent does after each sync (agent.syncHealthChecks).
		OnApplied: func(v *view.View, changed map[string]struct{}) { _, _ = hc.Update(v, changed) },
	}, nil, false)
	if err != nil {
		b.Fatal(err)
	}
	runtest.Start(b, s.Run)
	ctx := b.Context()
	first := &view.Update{SystemVersion: "s0", Resources: map[string]*switchyardv1.Resource{
		"node": {Name: "node", Version: "1", Body: &switchyardv1.Resource_NodeConfig{NodeConfig: dataplanetest.BenchConfig()}}}}
	for i := range n {
		name := fmt.Sprintf("bench/s%d", i)
		first.Resources[name] = &switchyardv1.Resource{Name: name, Version: "1",
			Body: &switchyardv1.Resource_Service{Service: dataplanetest.BenchService(i, false)}}
	}
	if _, err := s.Apply(ctx, first); err != nil {
		b.Fatal(err)
	}
	// One endpoint of bench/s7 moves and moves back: every update is a
	// new message, as from the wire.
	i := 0
	for b.Loop() {
		i++
		r := &switchyardv1.Resource{Name: "bench/s7", Version: fmt.Sprint(i),
			Body: &switchyardv1.Resource_Service{Service: dataplanetest.BenchService(7, i%2 == 1)}}
		u := &view.Update{SystemVersion: fmt.Sprint("s", i), Resources: map[string]*switchyardv1.Resource{r.Name: r}}
		if _, err := s.Apply(ctx, u); err != nil {
			b.Fatal(err)
		}
	}
}
