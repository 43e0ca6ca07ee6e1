package main

import (
	"fmt"
	"net/netip"
	"slices"
	"strings"
)

// nodePortLoopback are the loopback ranges, which never serve node ports.
var nodePortLoopback = []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8"), netip.MustParsePrefix("::1/128")}

// parseNodePortAddresses reads --nodeport-addresses as kube-proxy
// validates its flag: a comma-separated list of CIDRs and the keywords
// "primary" and "all", each keyword once. CIDRs come back in canonical
// form (host bits cleared). Loopback ("localhost", or a CIDR inside a
// loopback range) is refused: loopback node ports need route_localnet,
// which Switchyard never sets, so they could not answer.
func parseNodePortAddresses(s string) ([]string, error) {
	var out []string
	for f := range strings.SplitSeq(s, ",") {
		f = strings.TrimSpace(f)
		switch f {
		case "":
			continue
		case "primary", "all":
			if slices.Contains(out, f) {
				return nil, fmt.Errorf("--nodeport-addresses: %q given twice", f)
			}
			out = append(out, f)
			continue
		case "localhost":
			return nil, fmt.Errorf("--nodeport-addresses: %q: loopback node ports need route_localnet, which Switchyard never sets", f)
		}
		p, err := netip.ParsePrefix(f)
		if err != nil {
			return nil, fmt.Errorf("--nodeport-addresses: %q: want a CIDR, primary or all: %w", f, err)
		}
		p = p.Masked()
		for _, lo := range nodePortLoopback {
			if lo.Bits() <= p.Bits() && lo.Contains(p.Addr()) {
				return nil, fmt.Errorf("--nodeport-addresses: %s is loopback: loopback node ports need route_localnet, which Switchyard never sets", p)
			}
		}
		if !slices.Contains(out, p.String()) {
			out = append(out, p.String())
		}
	}
	return out, nil
}
