package ruleread

import (
	"net/netip"
	"testing"
)

// Listings as the latency bed's nodes print them (iptables 1.8.9 nft
// backend, nft 1.0.6), trimmed to the lines that matter plus decoys.
const (
	// kube-proxy: KUBE-SERVICES jumps to KUBE-SVC; the chain's own masq
	// rule and the NodePort rules name the same address and port.
	kubeProxySave = `*nat
:KUBE-SERVICES - [0:0]
-A KUBE-SERVICES -d 10.96.205.17/32 -p tcp -m comment --comment "other/svc cluster IP" -m tcp --dport 80 -j KUBE-SVC-OTHEROTHEROTHER1
-A KUBE-SERVICES -d 10.96.205.179/32 -p tcp -m comment --comment "latency/lat cluster IP" -m tcp --dport 8080 -j KUBE-SVC-WRONGPORTWRONGPO
-A KUBE-SVC-YQQDRIESHPWNXP5H ! -s 10.244.0.0/16 -d 10.96.205.179/32 -p tcp -m comment --comment "latency/lat cluster IP" -m tcp --dport 80 -j KUBE-MARK-MASQ
-A KUBE-SERVICES -d 10.96.205.179/32 -p tcp -m comment --comment "latency/lat cluster IP" -m tcp --dport 80 -j KUBE-SVC-YQQDRIESHPWNXP5H
COMMIT
`
	// Switchyard: the cluster IP's rule sits in a shard chain.
	switchyardSave = `*nat
-A KUBE-SERVICES -d 10.96.0.0/17 -j KUBE-SHARD-00
-A KUBE-SHARD-1F -d 10.96.237.76/32 -p tcp -m comment --comment "latency/lat cluster IP" -m tcp --dport 80 -j KUBE-SVC-W37VIURPO7BFCPLB
COMMIT
`
	// service-ips with its elements over several lines.
	serviceIPs = `table ip switchyard {
	map service-ips {
		type ipv4_addr . inet_proto . inet_service : verdict
		elements = { 10.96.0.10 . udp . 53 : goto svc-S5KDWTE3-default/web/udp/dns,
			     10.96.0.74 . udp . 53 : goto svc-CA5RM5KK-kube-system/dns/udp/,
			     10.96.0.10 . tcp . 80 : goto svc-SUSTUHLJ-default/web/tcp/http }
	}
}
`
)

func TestIptablesServiceChain(t *testing.T) {
	tests := []struct {
		name, save string
		vip        string
		want       string
	}{
		{"kube-proxy", kubeProxySave, "10.96.205.179:80", "KUBE-SVC-YQQDRIESHPWNXP5H"},
		{"switchyard shard", switchyardSave, "10.96.237.76:80", "KUBE-SVC-W37VIURPO7BFCPLB"},
		{"not programmed", switchyardSave, "10.96.237.7:80", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := IptablesServiceChain([]byte(tt.save), netip.MustParseAddrPort(tt.vip))
			if got != tt.want || (err != nil) != (tt.want == "") {
				t.Errorf("IptablesServiceChain(%s) = %q, %v; want %q", tt.vip, got, err, tt.want)
			}
		})
	}
}

func TestNftServiceChain(t *testing.T) {
	for vip, want := range map[string]string{
		"10.96.0.10:80": "svc-SUSTUHLJ-default/web/tcp/http",
		"10.96.0.10:53": "", // UDP only
		"10.96.0.7:80":  "",
	} {
		got, err := NftServiceChain([]byte(serviceIPs), netip.MustParseAddrPort(vip))
		if got != want || (err != nil) != (want == "") {
			t.Errorf("NftServiceChain(%s) = %q, %v; want %q", vip, got, err, want)
		}
	}
}

// TestNftServiceChainTable: in a whole table's listing with quoted names
// (as compare's dumps hold them), the element is found among other maps'
// and a longer address's, the name comes without quotes, and a jump
// counts as a goto does.
func TestNftServiceChainTable(t *testing.T) {
	table := []byte(`table ip switchyard {
	map endpoints-tcp-00 {
		typeof numgen random mod 65536 : ip daddr . tcp dport
		elements = { 0-65535 : 10.244.0.3 . 9376 }
	}
	map service-ips {
		type ipv4_addr . inet_proto . inet_service : verdict
		elements = { 110.96.1.1 . tcp . 80 : goto "svc-WRONG",
			     10.96.1.1 . tcp . 80 : goto "svc-SUSTUHLJ-compare/s00000/tcp/http",
			     10.96.1.2 . tcp . 80 : jump svc-JUMPJUMP }
	}
}`)
	for vip, want := range map[string]string{
		"10.96.1.1:80":    "svc-SUSTUHLJ-compare/s00000/tcp/http",
		"10.96.1.2:80":    "svc-JUMPJUMP",
		"10.244.0.3:9376": "",
	} {
		got, err := NftServiceChain(table, netip.MustParseAddrPort(vip))
		if got != want || (err != nil) != (want == "") {
			t.Errorf("NftServiceChain(%s) = %q, %v; want %q", vip, got, err, want)
		}
	}
}

// TestElements: blocks wrapped over lines give one element each, folded.
func TestElements(t *testing.T) {
	got := Elements([]byte(serviceIPs))
	want := []string{
		"10.96.0.10 . udp . 53 : goto svc-S5KDWTE3-default/web/udp/dns",
		"10.96.0.74 . udp . 53 : goto svc-CA5RM5KK-kube-system/dns/udp/",
		"10.96.0.10 . tcp . 80 : goto svc-SUSTUHLJ-default/web/tcp/http",
	}
	if len(got) != len(want) {
		t.Fatalf("Elements = %q, want %q", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("element %d = %q, want %q", i, got[i], want[i])
		}
	}
}
