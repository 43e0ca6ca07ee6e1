package serviceport

import (
	"fmt"
	"net/netip"

	switchyardv1 "github.com/switchyard-proxy/switchyard/proto/switchyard/v1"
)

// Node is the part of a NodeConfig every mode renders with, for one
// family.
type Node struct {
	ClusterCIDRs  []netip.Prefix
	NodeIPs       []netip.Addr
	MasqueradeAll bool
}

// ReadNode reads cfg (nil: no settings) for family f; bad entries are
// skipped with service "".
func ReadNode(cfg *switchyardv1.NodeConfig, f Family, skip SkipFunc) Node {
	var n Node
	if cfg == nil {
		return n
	}
	n.MasqueradeAll = cfg.GetMasqueradeAll()
	for _, s := range cfg.GetClusterCidrs() {
		p, ok, err := f.ParsePrefix(s)
		if err != nil {
			skip("", fmt.Sprintf("node config: %v", err))
		} else if ok {
			n.ClusterCIDRs = append(n.ClusterCIDRs, p)
		}
	}
	for _, s := range cfg.GetNodeIps() {
		a, ok, err := f.ParseAddr(s)
		if err != nil {
			skip("", fmt.Sprintf("node config: %v", err))
		} else if ok {
			n.NodeIPs = append(n.NodeIPs, a)
		}
	}
	return n
}
