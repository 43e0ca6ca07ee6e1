package xtables

import (
	"bytes"
	"context"
	"fmt"

	"github.com/switchyard-proxy/switchyard/dataplane/command"
)

// Flavour is the iptables back end: legacy (x_tables) or nft.
type Flavour string

const (
	// FlavourAuto detects the flavour the way kube-proxy's iptables-wrapper
	// does.
	FlavourAuto Flavour = ""
	// FlavourLegacy uses iptables-legacy-restore and friends.
	FlavourLegacy Flavour = "legacy"
	// FlavourNFT uses iptables-nft-restore and friends.
	FlavourNFT Flavour = "nft"
)

// hintChains are the chains kubelet creates in mangle to say which flavour
// the node uses.
var hintChains = [][]byte{[]byte(":KUBE-IPTABLES-HINT"), []byte(":KUBE-KUBELET-CANARY")}

// DetectFlavour decides legacy or nft inside the runner's namespace, as
// iptables-wrapper does: a kubelet hint chain in mangle wins; otherwise the
// flavour holding more rules, nft on a tie. It runs *-legacy-save, which
// creates legacy tables in the namespace it runs in: callers must give a
// runner bound to the node's (or a throwaway) namespace.
func DetectFlavour(ctx context.Context, r command.Runner) (Flavour, error) {
	nftMangle, nftErr := r.Run(ctx, []string{"iptables-nft-save", "-t", "mangle"}, nil)
	if nftErr == nil && hasHint(nftMangle) {
		return FlavourNFT, nil
	}
	legMangle, legErr := r.Run(ctx, []string{"iptables-legacy-save", "-t", "mangle"}, nil)
	if legErr == nil && hasHint(legMangle) {
		return FlavourLegacy, nil
	}
	if nftErr != nil && legErr != nil {
		return "", fmt.Errorf("detect iptables flavour: nft: %w; legacy: %w", nftErr, legErr)
	}
	count := func(bins ...string) int {
		n := 0
		for _, b := range bins {
			out, err := r.Run(ctx, []string{b}, nil)
			if err == nil {
				n += countRules(out)
			}
		}
		return n
	}
	if nftErr != nil {
		return FlavourLegacy, nil
	}
	if legErr != nil {
		return FlavourNFT, nil
	}
	legacy := count("iptables-legacy-save", "ip6tables-legacy-save")
	nft := count("iptables-nft-save", "ip6tables-nft-save")
	if legacy > nft {
		return FlavourLegacy, nil
	}
	return FlavourNFT, nil
}

func hasHint(save []byte) bool {
	for _, h := range hintChains {
		if bytes.Contains(save, h) {
			return true
		}
	}
	return false
}

func countRules(save []byte) int {
	n := 0
	for _, l := range bytes.Split(save, []byte("\n")) {
		if bytes.HasPrefix(l, []byte("-")) {
			n++
		}
	}
	return n
}
