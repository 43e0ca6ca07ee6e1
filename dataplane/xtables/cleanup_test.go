package xtables

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// testOwnership owns OWN-* chains; EXCL-* chains are only its own; set
// OWNSET is its.
var testOwnership = Ownership{
	Chain:     func(n string) bool { return strings.HasPrefix(n, "OWN-") || strings.HasPrefix(n, "EXCL-") },
	Exclusive: func(n string) bool { return strings.HasPrefix(n, "EXCL-") },
	Sets:      func(n string) bool { return n == "OWNSET" },
}

func TestCleanupPayload(t *testing.T) {
	saved, _ := ParseSave([]byte(`*nat
:PREROUTING ACCEPT [0:0]
:CNI-X - [0:0]
:OWN-A - [0:0]
:OWN-B - [0:0]
:EXCL-1 - [0:0]
-A PREROUTING -j OWN-A
-A PREROUTING -j CNI-X
-A CNI-X -j OWN-B
-A CNI-X -j EXCL-1
-A CNI-X -m set --match-set OWNSET src -j ACCEPT
-A CNI-X -m set --match-set OTHER src -j ACCEPT
-A OWN-A -j OWN-B
-A OWN-B -j DNAT --to-destination 10.0.0.1:80
COMMIT
*filter
:INPUT ACCEPT [0:0]
-A INPUT -j ACCEPT
COMMIT
`))
	got := CleanupPayload(saved, testOwnership)
	want := Cleanup{
		// OWN-B stays (CNI-X jumps to it) but is emptied; the jump from
		// the built-in chain, the one to the exclusive chain and the
		// rule on our set go; CNI-X's other rules and filter stay.
		Payload: `*nat
:OWN-A - [0:0]
:OWN-B - [0:0]
:EXCL-1 - [0:0]
-D PREROUTING -j OWN-A
-D CNI-X -j EXCL-1
-D CNI-X -m set --match-set OWNSET src -j ACCEPT
-X OWN-A
-X EXCL-1
COMMIT
`,
		Deleted: []string{"nat/OWN-A", "nat/EXCL-1"},
		Kept:    []string{"nat/OWN-B"},
		Rules:   3,
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("cleanup (-want +got):\n%s", diff)
	}

	// What the restore leaves: a second cleanup writes nothing.
	after, _ := ParseSave([]byte(`*nat
:PREROUTING ACCEPT [0:0]
:CNI-X - [0:0]
:OWN-B - [0:0]
-A PREROUTING -j CNI-X
-A CNI-X -j OWN-B
-A CNI-X -m set --match-set OTHER src -j ACCEPT
COMMIT
`))
	again := CleanupPayload(after, testOwnership)
	if diff := cmp.Diff(Cleanup{Kept: []string{"nat/OWN-B"}}, again); diff != "" {
		t.Errorf("second cleanup (-want +got):\n%s", diff)
	}
}

func TestHasKubeProxy(t *testing.T) {
	with, _ := ParseSave([]byte("*mangle\n:" + KubeProxyCanary + " - [0:0]\nCOMMIT\n*nat\nCOMMIT\n"))
	without, _ := ParseSave([]byte("*nat\n:KUBE-SERVICES - [0:0]\nCOMMIT\n"))
	if !HasKubeProxy(with) || HasKubeProxy(without) {
		t.Errorf("HasKubeProxy = %v with the canary, %v without; want true, false", HasKubeProxy(with), HasKubeProxy(without))
	}
}
