package xtables

import (
	"context"
	"fmt"
	"strings"
	"testing"
)

// stubRunner answers *-save commands from a table of outputs.
type stubRunner map[string]string

func (s stubRunner) Run(_ context.Context, argv []string, _ []byte) ([]byte, error) {
	out, ok := s[strings.Join(argv, " ")]
	if !ok {
		return nil, fmt.Errorf("%s: not found", argv[0])
	}
	return []byte(out), nil
}

func TestDetectFlavour(t *testing.T) {
	rules := func(n int) string { return "*filter\n" + strings.Repeat("-A INPUT -j ACCEPT\n", n) + "COMMIT\n" }
	cases := []struct {
		name string
		r    stubRunner
		want Flavour
	}{
		{"nft hint", stubRunner{"iptables-nft-save -t mangle": ":KUBE-IPTABLES-HINT - [0:0]\n"}, FlavourNFT},
		{"legacy hint", stubRunner{"iptables-nft-save -t mangle": "", "iptables-legacy-save -t mangle": ":KUBE-KUBELET-CANARY - [0:0]\n"}, FlavourLegacy},
		{"more legacy rules", stubRunner{"iptables-nft-save -t mangle": "", "iptables-legacy-save -t mangle": "",
			"iptables-legacy-save": rules(5), "ip6tables-legacy-save": rules(1), "iptables-nft-save": rules(2)}, FlavourLegacy},
		{"tie is nft", stubRunner{"iptables-nft-save -t mangle": "", "iptables-legacy-save -t mangle": ""}, FlavourNFT},
		{"only legacy", stubRunner{"iptables-legacy-save -t mangle": ""}, FlavourLegacy},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := DetectFlavour(t.Context(), tc.r)
			if err != nil || got != tc.want {
				t.Errorf("got %q, %v; want %q", got, err, tc.want)
			}
		})
	}
	if _, err := DetectFlavour(t.Context(), stubRunner{}); err == nil {
		t.Error("no binaries: want an error")
	}
}
