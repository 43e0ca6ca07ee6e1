package iptables

import (
	"testing"

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
	forFamiliesAndFlavours(t, func(t *testing.T, b *bed, fl xtables.Flavour) {
		b.CheckHairpin(t, dptest.ApplyWith(b.newDP(t, iptables.Config{Flavour: fl})))
	})
}
