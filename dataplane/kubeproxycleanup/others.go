package kubeproxycleanup

import (
	"context"
	"errors"
	"fmt"
	"strings"
)

// nftTable is the table kube-proxy's nftables mode owns, in families ip
// and ip6.
const nftTable = "kube-proxy"

// kubeProxyNFTFamilies returns the families of `nft list tables` output
// that have a kube-proxy table.
func kubeProxyNFTFamilies(out string) []string {
	var fams []string
	for line := range strings.SplitSeq(out, "\n") {
		f := strings.Fields(line)
		if len(f) == 3 && f[0] == "table" && f[2] == nftTable && (f[1] == "ip" || f[1] == "ip6") {
			fams = append(fams, f[1])
		}
	}
	return fams
}

// ipvsSets are the ipsets of kube-proxy's ipvs mode; IPv6 ones are named
// "KUBE-6-" + the rest. Exact names, not a KUBE- prefix: other software
// (kube-router's KUBE-DST-*, KUBE-SRC-*) uses that prefix too.
var ipvsSets = []string{
	"KUBE-LOOP-BACK", "KUBE-CLUSTER-IP", "KUBE-EXTERNAL-IP", "KUBE-EXTERNAL-IP-LOCAL",
	"KUBE-LOAD-BALANCER", "KUBE-LOAD-BALANCER-LOCAL", "KUBE-LOAD-BALANCER-FW",
	"KUBE-LOAD-BALANCER-SOURCE-IP", "KUBE-LOAD-BALANCER-SOURCE-CIDR",
	"KUBE-NODE-PORT-TCP", "KUBE-NODE-PORT-LOCAL-TCP", "KUBE-NODE-PORT-UDP", "KUBE-NODE-PORT-LOCAL-UDP",
	"KUBE-NODE-PORT-SCTP-HASH", "KUBE-NODE-PORT-LOCAL-SCTP-HASH",
	"KUBE-HEALTH-CHECK-NODE-PORT", "KUBE-IPVS-IPS",
}

// maxSetName is the longest ipset name the kernel keeps
// (IPSET_MAXNAMELEN 32, with the NUL): longer names are cut, so two of
// kube-proxy's IPv6 sets exist as "KUBE-6-LOAD-BALANCER-SOURCE-CID" and
// "KUBE-6-NODE-PORT-LOCAL-SCTP-HAS".
const maxSetName = 31

func isKubeProxySet(name string) bool {
	for _, set := range ipvsSets {
		v6 := "KUBE-6-" + strings.TrimPrefix(set, "KUBE-")
		if name == set || name == v6[:min(len(v6), maxSetName)] {
			return true
		}
	}
	return false
}

// kubeProxyIPSets returns kube-proxy's sets in `ipset list -n` output.
func kubeProxyIPSets(out string) []string {
	var sets []string
	for line := range strings.SplitSeq(out, "\n") {
		if name := strings.TrimSpace(line); isKubeProxySet(name) {
			sets = append(sets, name)
		}
	}
	return sets
}

// cleanIPSets destroys sets. It runs after the iptables cleanup, which
// removed kube-proxy's references to them.
func (c *cleaner) cleanIPSets(ctx context.Context, sets []string) ([]string, error) {
	var done []string
	var errs []error
	for _, s := range sets {
		if _, err := c.r.Run(ctx, []string{"ipset", "destroy", s}, nil); err != nil {
			errs = append(errs, fmt.Errorf("destroy ipset %s: %w", s, err))
			continue
		}
		done = append(done, s)
	}
	return done, errors.Join(errs...)
}
