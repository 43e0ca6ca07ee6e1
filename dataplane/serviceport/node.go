package serviceport

import (
	"fmt"
	"net/netip"

	"github.com/switchyard-proxy/switchyard/dataplane"
	switchyardv1 "github.com/switchyard-proxy/switchyard/proto/switchyard/v1"
)

// Node is the part of a NodeConfig every mode renders with, for one
// family.
type Node struct {
	ClusterCIDRs  []netip.Prefix
	NodeIPs       []netip.Addr
	MasqueradeAll bool
	// NodePorts are the local addresses node ports answer on.
	NodePorts NodePorts
	// ServiceCIDRs are the cluster's Service IP ranges of the family
	// (ServiceCIDR objects), in the control plane's order.
	ServiceCIDRs []netip.Prefix
}

// ReadNode reads cfg (nil: no settings) for family f; bad entries are
// skipped with service "". nodePortsDefault is the mode's reading of an
// empty node_port_addresses (NodePortsAll or NodePortsPrimary, as
// kube-proxy defaults each mode).
func ReadNode(cfg *switchyardv1.NodeConfig, f dataplane.Family, nodePortsDefault string, skip SkipFunc) Node {
	var n Node
	n.MasqueradeAll = cfg.GetMasqueradeAll()
	n.ClusterCIDRs = prefixes("cluster CIDR", cfg.GetClusterCidrs(), f, skip)
	for _, s := range cfg.GetNodeIps() {
		a, ok, err := f.ParseAddr(s)
		if err != nil {
			skip("", fmt.Sprintf("node config: %v", err))
		} else if ok {
			n.NodeIPs = append(n.NodeIPs, a)
		}
	}
	n.ServiceCIDRs = prefixes("service CIDR", cfg.GetServiceCidrs(), f, skip)
	list := cfg.GetNodePortAddresses()
	if len(list) == 0 {
		list = []string{nodePortsDefault}
	}
	// The node's primary address of the family is the first of its node
	// IPs (InternalIP before ExternalIP, as kube-proxy's GetNodeHostIPs
	// orders them), invalid when it has none: the first of those just
	// read, not a second parse of the list.
	var primary netip.Addr
	if len(n.NodeIPs) > 0 {
		primary = n.NodeIPs[0]
	}
	n.NodePorts = readNodePorts(list, f, primary, skip)
	return n
}

// prefixes parses the CIDRs of family f, skipping bad ones.
func prefixes(what string, in []string, f dataplane.Family, skip SkipFunc) []netip.Prefix {
	var out []netip.Prefix
	for _, s := range in {
		p, ok, err := f.ParsePrefix(s)
		if err != nil {
			skip("", fmt.Sprintf("node config: %s: %v", what, err))
		} else if ok {
			out = append(out, p)
		}
	}
	return out
}
