package latency

import (
	"net/netip"
	"testing"

	"github.com/switchyard-proxy/switchyard/e2e/testbed/ruleread"
)

// Listings as the bed's nodes print them (nft 1.0.6), trimmed to the
// lines that matter plus decoys. The chain lookups and the address check
// are package ruleread's, tested there.
const (
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
	// kube-proxy's nftables chain: two endpoints through endpoint chains
	// named by address.
	kubeProxyNftTwo = `table ip kube-proxy {
	chain service-2LCH2KWQ-latency/lat/tcp/ {
		ip daddr 10.96.237.4 tcp dport 80 ip saddr != 10.244.0.0/16 jump mark-for-masquerade
		numgen random mod 2 vmap { 0 : goto endpoint-5OJB2KTY-latency/lat/tcp/__10.244.1.3/9376, 1 : goto endpoint-ZZV2LHHX-latency/lat/tcp/__10.244.0.12/9376 }
	}
}
`
)

// holds is ruleread.HoldsAddr of an address in text.
func holds(text []byte, ip string) bool { return ruleread.HoldsAddr(text, netip.MustParseAddr(ip)) }

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
		if got := holds(text, ip); got != want {
			t.Errorf("holds(%s) = %v, want %v in\n%s", ip, got, want, text)
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

// TestSplitNftListing: kube-proxy's chain without maps is the chain.
func TestSplitNftListing(t *testing.T) {
	chain, maps := splitNftListing([]byte(kubeProxyNftTwo))
	if len(maps) != 0 || len(mapRefs(chain)) != 0 || !holds([]byte(chain), "10.244.1.3") {
		t.Errorf("chain %q, maps %v", chain, maps)
	}
}
