package iptables

import (
	"testing"

	"github.com/switchyard-proxy/switchyard/dataplane"
	"github.com/switchyard-proxy/switchyard/dataplane/iptables"
	"github.com/switchyard-proxy/switchyard/dataplane/xtables"
	"github.com/switchyard-proxy/switchyard/e2e/dataplane/dptest"
)

// TestHairpinThroughSet: a pod reaching itself through a cluster IP (a
// plain service, without KUBE-SEP chains, and a ClientIP-affinity one,
// whose KUBE-SEP has no hairpin rule of its own) is masqueraded by the
// hairpin set's rule, in both families and on both flavours
// (dptest.CheckHairpin).
func TestHairpinThroughSet(t *testing.T) {
	dptest.ForFamilies(t, func(t *testing.T, f dataplane.Family) {
		for _, fl := range []xtables.Flavour{xtables.FlavourNFT, xtables.FlavourLegacy} {
			t.Run(string(fl), func(t *testing.T) {
				b := newBedFor(t, f, false)
				dp := b.newDP(t, iptables.Config{Flavour: fl})
				b.CheckHairpin(t, func(t *testing.T, st *dataplane.State) {
					if err := dp.Apply(t.Context(), st, dataplane.ApplyOptions{}); err != nil {
						t.Fatalf("Apply: %v", err)
					}
				})
			})
		}
	})
}
