package iptables

import (
	"net/netip"
	"testing"

	"github.com/switchyard-proxy/switchyard/dataplane"
)

// TestChainNamesAreKubeProxys: a service port's chains carry the names
// kube-proxy's iptables mode gives them (pkg/proxy/iptables portProtoHash
// and servicePortEndpointChainName), so a hand-over between the two
// proxies rewrites chains in place instead of leaving either's restore a
// chain it must delete while the other's still jump to it. The expected
// names are kube-proxy's, as its own tests and every cluster show them.
func TestChainNamesAreKubeProxys(t *testing.T) {
	tests := []struct {
		name string
		got  string
		want string
	}{
		{"kube-dns dns/udp", svcChain(portHashKey("kube-system", "kube-dns", "dns", dataplane.UDP)), "KUBE-SVC-TCOU7JCQXEZGVUNU"},
		{"kube-dns dns-tcp/tcp", svcChain(portHashKey("kube-system", "kube-dns", "dns-tcp", dataplane.TCP)), "KUBE-SVC-ERIFXISQEP7F7OF4"},
		{"kube-dns metrics/tcp", svcChain(portHashKey("kube-system", "kube-dns", "metrics", dataplane.TCP)), "KUBE-SVC-JD5MR3NA4I4DYORP"},
		{"kubernetes https/tcp", svcChain(portHashKey("default", "kubernetes", "https", dataplane.TCP)), "KUBE-SVC-NPX46M4PTMTKRN6Y"},
		// kube-proxy's proxier_test.go: ns1/svc1:p80 over TCP, and its
		// endpoint 10.180.0.1:80.
		{"proxier_test svc", svcChain(portHashKey("ns1", "svc1", "p80", dataplane.TCP)), "KUBE-SVC-XPGD46QRK7WJZT7O"},
		{"proxier_test sep", sepChain(portHashKey("ns1", "svc1", "p80", dataplane.TCP), netip.MustParseAddrPort("10.180.0.1:80")), "KUBE-SEP-SXIVWICOYRO3J4NJ"},
		{"proxier_test ext", extChain(portHashKey("ns1", "svc1", "p80", dataplane.TCP)), "KUBE-EXT-XPGD46QRK7WJZT7O"},
	}
	for _, tc := range tests {
		if tc.got != tc.want {
			t.Errorf("%s: %s, want %s", tc.name, tc.got, tc.want)
		}
	}
}
