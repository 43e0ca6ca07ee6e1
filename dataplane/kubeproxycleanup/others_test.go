package kubeproxycleanup

import (
	"slices"
	"testing"
)

// TestKubeProxyIPSets: kube-proxy's sets are picked by exact name, IPv6
// ones as the kernel keeps them (cut to 31 characters), and no one else's.
func TestKubeProxyIPSets(t *testing.T) {
	out := "KUBE-CLUSTER-IP\nKUBE-6-CLUSTER-IP\n" +
		"KUBE-LOAD-BALANCER-SOURCE-CIDR\nKUBE-6-LOAD-BALANCER-SOURCE-CID\n" +
		"KUBE-NODE-PORT-LOCAL-SCTP-HASH\nKUBE-6-NODE-PORT-LOCAL-SCTP-HAS\n" +
		"KUBE-DST-ABC\nKUBE-6-LOAD-BALANCER-SOURCE-CI\nKUBE-6-FOO\nfoo\n"
	want := []string{"KUBE-CLUSTER-IP", "KUBE-6-CLUSTER-IP",
		"KUBE-LOAD-BALANCER-SOURCE-CIDR", "KUBE-6-LOAD-BALANCER-SOURCE-CID",
		"KUBE-NODE-PORT-LOCAL-SCTP-HASH", "KUBE-6-NODE-PORT-LOCAL-SCTP-HAS"}
	if got := kubeProxyIPSets(out); !slices.Equal(got, want) {
		t.Errorf("kubeProxyIPSets = %q, want %q", got, want)
	}
}
