package kubeproxycleanup

import (
	"bytes"
	"context"
	"errors"
	"fmt"

	"github.com/switchyard-proxy/switchyard/dataplane/command"
	"github.com/switchyard-proxy/switchyard/dataplane/xtables"
)

// Present reports kube-proxy's evidence that is cheap to read, for a check
// that repeats: its "kube-proxy" nftables tables (nft list tables) and its
// canary chain in the mangle table of each of flavours (IPv4; kube-proxy
// writes both families together). kube-proxy creates both at its first
// sync, so after Run removed them, Present finding one means kube-proxy
// runs again. Unlike Run it reads no nat table: at 10k Services an
// iptables-nft-save of nat takes seconds.
func Present(ctx context.Context, r command.Runner, flavours ...xtables.Flavour) ([]string, error) {
	var ev []string
	var errs []error
	if out, err := r.Run(ctx, []string{"nft", "list", "tables"}, nil); err != nil {
		errs = append(errs, fmt.Errorf("nft list tables: %w", err))
	} else {
		for _, fam := range kubeProxyNFTFamilies(string(out)) {
			ev = append(ev, "nftables "+fam+" "+nftTable)
		}
	}
	canary := []byte(":" + xtables.KubeProxyCanary + " ")
	for _, f := range flavours {
		save := "iptables-" + string(f) + "-save"
		out, err := r.Run(ctx, []string{save, "-t", "mangle"}, nil)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s -t mangle: %w", save, err))
			continue
		}
		if bytes.Contains(out, canary) {
			ev = append(ev, save+"/mangle/"+xtables.KubeProxyCanary)
		}
	}
	return ev, errors.Join(errs...)
}
