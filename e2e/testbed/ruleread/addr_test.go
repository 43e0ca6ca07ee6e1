package ruleread

import (
	"net/netip"
	"testing"
)

// kube-proxy's nftables chains as the latency bed prints them: one
// endpoint inline, two through endpoint chains named by address.
const (
	kubeProxyNftOne = `table ip kube-proxy {
	chain service-2LCH2KWQ-latency/lat/tcp/ {
		meta l4proto tcp dnat to 10.244.1.3:9376
	}
}
`
	kubeProxyNftTwo = `table ip kube-proxy {
	chain service-2LCH2KWQ-latency/lat/tcp/ {
		ip daddr 10.96.237.4 tcp dport 80 ip saddr != 10.244.0.0/16 jump mark-for-masquerade
		numgen random mod 2 vmap { 0 : goto endpoint-5OJB2KTY-latency/lat/tcp/__10.244.1.3/9376, 1 : goto endpoint-ZZV2LHHX-latency/lat/tcp/__10.244.0.12/9376 }
	}
}
`
)

func TestHoldsAddr(t *testing.T) {
	tests := []struct {
		text, ip string
		want     bool
	}{
		// The latency bed's rules.
		{`-A KUBE-SVC-X -m comment --comment "latency/lat -> 10.244.1.3:9376" -j KUBE-SEP-Y`, "10.244.1.3", true},
		{`-j DNAT --to-destination 10.244.1.3:9376`, "10.244.1.3", true},
		{`-j DNAT --to-destination 10.244.1.30:9376`, "10.244.1.3", false},
		{`-j DNAT --to-destination 110.244.1.3:9376`, "10.244.1.3", false},
		{kubeProxyNftOne, "10.244.1.3", true},
		{kubeProxyNftTwo, "10.244.0.12", true},
		{kubeProxyNftTwo, "10.244.0.1", false},
		{`ip saddr != 10.244.0.0/16`, "10.244.0.0", true}, // a network address is never a pod's
		// compare's dumps and targeted reads.
		{"-j DNAT --to-destination 10.245.0.1:8080", "10.245.0.1", true},
		{"chain endpoint-X-compare/s1/tcp/http__10.245.0.1/8080 {", "10.245.0.1", true},
		{"--to-destination 10.245.0.11:8080", "10.245.0.1", false},
		{"--to-destination 110.245.0.1:8080", "10.245.0.1", false},
		{"10.245.0.1", "10.245.0.1", true},
		{"", "10.245.0.1", false},
	}
	for _, tt := range tests {
		if got := HoldsAddr([]byte(tt.text), netip.MustParseAddr(tt.ip)); got != tt.want {
			t.Errorf("HoldsAddr(%q, %s) = %v, want %v", tt.text, tt.ip, got, tt.want)
		}
	}
	if HoldsAddr([]byte("invalid IP"), netip.Addr{}) {
		t.Error("the zero Addr is held")
	}
}

func TestCountAddrs(t *testing.T) {
	dump := []byte(`-A KUBE-SERVICES -d 10.96.1.1/32 -p tcp -j KUBE-SVC-A
-A KUBE-SERVICES -d 10.96.1.10/32 -p tcp -j KUBE-SVC-B
-A X -d 110.96.1.2/32
	10.96.1.3 . tcp . 80 : goto service-x
-A KUBE-SERVICES -d 10.96.0.1/32 -j KUBE-SVC-K`)
	want := map[netip.Addr]bool{}
	for _, ip := range []string{"10.96.1.1", "10.96.1.2", "10.96.1.3", "10.96.1.10"} {
		want[netip.MustParseAddr(ip)] = true
	}
	if got := CountAddrs(dump, "10.96.", want); got != 3 {
		t.Errorf("CountAddrs = %d, want 3 (10.96.1.2 only as part of 110.96.1.2)", got)
	}
	if got := CountAddrs(dump, "", want); got != 3 {
		t.Errorf("CountAddrs with no prefix = %d, want 3", got)
	}
}
