package latency

import (
	"net/netip"
	"testing"
)

// Listings as the bed's nodes print them (iptables 1.8.9 nft backend,
// nft 1.0.6), trimmed to the lines that matter plus decoys.
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
	// Switchyard's nftables chain and its shared endpoint map: the
	// element of another chain's block (10.244.9.9) must not count.
	switchyardNft = `table ip switchyard {
	chain svc-2LCH2KWQ-latency/lat/tcp/ {
		ip daddr 10.96.27.8 jump mark-for-masquerade
		meta l4proto tcp dnat ip to numgen random mod 65536 offset 764805120 map @endpoints-tcp-22
	}
}
table ip switchyard {
	map endpoints-tcp-22 {
		typeof numgen random mod 65536 : ip daddr . tcp dport
		flags interval
		elements = { 43253760-43319295 : 10.244.9.9 . 9376,
			     764805120-764837887 : 10.244.0.3 . 9376, 764837888-764870655 : 10.244.1.7 . 9376 }
	}
}
`
	// kube-proxy's nftables chain: one endpoint inline, two through
	// endpoint chains named by address.
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
			got, err := iptablesServiceChain([]byte(tt.save), netip.MustParseAddrPort(tt.vip))
			if got != tt.want || (err != nil) != (tt.want == "") {
				t.Errorf("iptablesServiceChain(%s) = %q, %v; want %q", tt.vip, got, err, tt.want)
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
		got, err := nftServiceChain([]byte(serviceIPs), netip.MustParseAddrPort(vip))
		if got != want || (err != nil) != (want == "") {
			t.Errorf("nftServiceChain(%s) = %q, %v; want %q", vip, got, err, want)
		}
	}
}

// TestOwnElements: the rules text of a Switchyard nftables service holds
// its own endpoints and not those of another chain sharing the map.
func TestOwnElements(t *testing.T) {
	chain, maps := splitNftListing([]byte(switchyardNft))
	refs := mapRefs(chain)
	if len(refs) != 1 || refs[0] != (mapRef{name: "endpoints-tcp-22", lo: 764805120, hi: 764805120 + 65536}) {
		t.Fatalf("mapRefs = %+v", refs)
	}
	text := ownElements(chain, refs, maps)
	for ip, want := range map[string]bool{"10.244.0.3": true, "10.244.1.7": true, "10.244.9.9": false, "10.96.27.8": true} {
		if got := holdsIP(text, ip); got != want {
			t.Errorf("holdsIP(%s) = %v, want %v in\n%s", ip, got, want, text)
		}
	}
}

// TestMapRefs: a set looked up with @ is not an endpoint map; a numgen
// draw without offset starts at 0; a map not keyed by numgen keeps all.
func TestMapRefs(t *testing.T) {
	chain := `chain c {
		ip saddr != @cluster-cidrs jump mark-for-masquerade
		dnat ip to numgen random mod 65536 map @endpoints-tcp-00
		ip saddr vmap @affinity-x
	}`
	got := mapRefs(chain)
	want := []mapRef{{name: "endpoints-tcp-00", lo: 0, hi: 65536}, {name: "affinity-x"}}
	if len(got) != len(want) || got[0] != want[0] || got[1] != want[1] {
		t.Errorf("mapRefs = %+v, want %+v", got, want)
	}
}

func TestHoldsIP(t *testing.T) {
	tests := []struct {
		text, ip string
		want     bool
	}{
		{`-A KUBE-SVC-X -m comment --comment "latency/lat -> 10.244.1.3:9376" -j KUBE-SEP-Y`, "10.244.1.3", true},
		{`-j DNAT --to-destination 10.244.1.3:9376`, "10.244.1.3", true},
		{`-j DNAT --to-destination 10.244.1.30:9376`, "10.244.1.3", false},
		{`-j DNAT --to-destination 110.244.1.3:9376`, "10.244.1.3", false},
		{kubeProxyNftOne, "10.244.1.3", true},
		{kubeProxyNftTwo, "10.244.0.12", true},
		{kubeProxyNftTwo, "10.244.0.1", false},
		{`ip saddr != 10.244.0.0/16`, "10.244.0.0", true}, // a network address is never a pod's
	}
	for _, tt := range tests {
		if got := holdsIP([]byte(tt.text), tt.ip); got != tt.want {
			t.Errorf("holdsIP(%q, %s) = %v, want %v", tt.text, tt.ip, got, tt.want)
		}
	}
}

// TestSplitNftListing: kube-proxy's chain without maps is the chain.
func TestSplitNftListing(t *testing.T) {
	chain, maps := splitNftListing([]byte(kubeProxyNftTwo))
	if len(maps) != 0 || len(mapRefs(chain)) != 0 || !holdsIP([]byte(chain), "10.244.1.3") {
		t.Errorf("chain %q, maps %v", chain, maps)
	}
}
