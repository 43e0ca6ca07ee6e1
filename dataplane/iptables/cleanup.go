package iptables

import (
	"strings"

	"github.com/switchyard-proxy/switchyard/dataplane/xtables"
)

// ownership is this mode's: every chain it creates, or, where kube-proxy
// has left its canary, only the chains kube-proxy never names (shards,
// off-cluster masquerade), its own jumps from built-in chains (xtables.IsOwnJump)
// and the rules matching the hairpin sets. The
// rest is kube-proxy's to remove (its own full sync deletes the KUBE-SVC-*
// chains it does not use) or --cleanup-kube-proxy's.
func ownership(kubeProxy bool) xtables.Ownership {
	o := xtables.Ownership{Chain: IsOwnedChain, Exclusive: isExclusiveChain, Sets: isHairpinSet, Jump: xtables.IsOwnJump}
	if kubeProxy {
		o.Chain = isExclusiveChain
	}
	return o
}

// isExclusiveChain reports the chains of this mode that kube-proxy never
// creates.
func isExclusiveChain(name string) bool {
	return name == chainOffClusterMasq || strings.HasPrefix(name, prefixShard)
}

func isHairpinSet(name string) bool { return name == hairpinSetV4 || name == hairpinSetV6 }
