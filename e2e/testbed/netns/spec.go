package netns

import (
	"fmt"
	"net/netip"
	"regexp"
)

// Defaults used for zero fields of Spec.
var (
	DefaultNetworkCIDR = netip.MustParsePrefix("10.200.0.0/24")
	DefaultClusterCIDR = netip.MustParsePrefix("10.244.0.0/16")
	DefaultServiceCIDR = netip.MustParsePrefix("10.96.0.0/16")

	// The IPv6 plan of a DualStack spec: unique local addresses (RFC
	// 4193), which never leave the machine, shaped like the IPv4 ones.
	DefaultNetworkCIDR6 = netip.MustParsePrefix("fd00:200::/64")
	DefaultClusterCIDR6 = netip.MustParsePrefix("fd00:244::/56")
	DefaultServiceCIDR6 = netip.MustParsePrefix("fd00:96::/112")
)

const (
	// DefaultPrefix starts every namespace name a Topology creates.
	DefaultPrefix = "sy-"
	// DefaultFirstNodeHost is the host number of node 0 on the network.
	DefaultFirstNodeHost = 10
	// DefaultClientHost is the host number of the client namespace.
	DefaultClientHost = 2
	// DefaultControlHost is the host number of the control namespace.
	DefaultControlHost = 3
	// DefaultNodeCIDRBits is the prefix length of each node's pod CIDR.
	DefaultNodeCIDRBits = 24
	// DefaultNodeCIDRBits6 is the prefix length of each node's IPv6 pod
	// CIDR.
	DefaultNodeCIDRBits6 = 64
)

// Spec describes a topology. The zero value is one node with one pod on the
// default address plan.
type Spec struct {
	// Nodes is the number of node namespaces (default 1).
	Nodes int
	// Pods is the total number of pods, placed round-robin over the nodes
	// (pod k on node k mod Nodes). When zero, PodsPerNode is used.
	Pods int
	// PodsPerNode is the number of pods on every node when Pods is zero
	// (default 1). Setting both Pods and PodsPerNode is an error.
	PodsPerNode int

	// NetworkCIDR is the segment shared by nodes, client and control.
	NetworkCIDR netip.Prefix
	// FirstNodeHost is the host number of node 0; node i gets FirstNodeHost+i.
	FirstNodeHost int
	// ClientHost and ControlHost are host numbers on NetworkCIDR.
	ClientHost  int
	ControlHost int

	// ClusterCIDR is cut into one pod CIDR per node, NodeCIDRBits long.
	ClusterCIDR  netip.Prefix
	NodeCIDRBits int
	// ServiceCIDR is routed from client and control through GatewayNode and,
	// on every node, out of the node's uplink so that connect() to a virtual
	// IP reaches the NAT hooks instead of failing with ENETUNREACH.
	ServiceCIDR netip.Prefix

	// GatewayNode is the node through which client and control reach the
	// service CIDR (default node 0).
	GatewayNode int
	// PodRoutesViaGateway routes every pod CIDR from client and control via
	// GatewayNode instead of via the node that owns it.
	PodRoutesViaGateway bool

	// RouteLocalnet sets net.ipv4.conf.all.route_localnet=1 on nodes
	// (NodePort on 127.0.0.1).
	RouteLocalnet bool
	// DisableBridgeNF sets net.bridge.bridge-nf-call-iptables=0 on nodes.
	// By default it is 1, as Kubernetes requires, so that traffic between
	// pods of one node bridge passes iptables.
	DisableBridgeNF bool
	// NoICMPRateLimit sets net.ipv4.icmp_ratelimit=0 on nodes (and
	// net.ipv6.icmp.ratelimit=0 with DualStack). By default a node sends a
	// peer a burst of six ICMP errors and then one a second, so a test
	// that expects many refusals in a row (REJECT's port unreachable) in
	// quick succession sees some of them time out instead.
	NoICMPRateLimit bool

	// DualStack gives every namespace on the network, every pod bridge
	// and every pod an IPv6 address beside its IPv4 one, with the same
	// host numbers in the *6 CIDRs below, and the same routes in IPv6;
	// nodes forward IPv6 too. Without it the topology is IPv4 only.
	DualStack bool
	// NetworkCIDR6, ClusterCIDR6, NodeCIDRBits6 and ServiceCIDR6 are the
	// IPv6 counterparts of the fields above, used with DualStack only
	// (defaults DefaultNetworkCIDR6, DefaultClusterCIDR6, /64,
	// DefaultServiceCIDR6).
	NetworkCIDR6  netip.Prefix
	ClusterCIDR6  netip.Prefix
	NodeCIDRBits6 int
	ServiceCIDR6  netip.Prefix

	// Prefix starts every namespace name (default "sy-").
	Prefix string

	// NoPodBridge builds nodes without a pod bridge and without pod
	// namespaces: a CNI plugin owns both (e2e/cluster's kubelet nodes).
	// Pods and PodsPerNode must then be zero. PodCIDR and PodGateway are
	// still planned, for the CNI configuration.
	NoPodBridge bool
}

var prefixPattern = regexp.MustCompile(`^[a-z][a-z0-9-]{0,15}$`)

// withDefaults returns s with zero fields replaced by defaults.
func (s Spec) withDefaults() Spec {
	if s.Nodes == 0 {
		s.Nodes = 1
	}
	if s.Pods == 0 && s.PodsPerNode == 0 && !s.NoPodBridge {
		s.PodsPerNode = 1
	}
	if !s.NetworkCIDR.IsValid() {
		s.NetworkCIDR = DefaultNetworkCIDR
	}
	if s.FirstNodeHost == 0 {
		s.FirstNodeHost = DefaultFirstNodeHost
	}
	if s.ClientHost == 0 {
		s.ClientHost = DefaultClientHost
	}
	if s.ControlHost == 0 {
		s.ControlHost = DefaultControlHost
	}
	if !s.ClusterCIDR.IsValid() {
		s.ClusterCIDR = DefaultClusterCIDR
	}
	if s.NodeCIDRBits == 0 {
		s.NodeCIDRBits = DefaultNodeCIDRBits
	}
	if !s.ServiceCIDR.IsValid() {
		s.ServiceCIDR = DefaultServiceCIDR
	}
	if s.Prefix == "" {
		s.Prefix = DefaultPrefix
	}
	if s.DualStack {
		s.NetworkCIDR6 = orDefault(s.NetworkCIDR6, DefaultNetworkCIDR6)
		s.ClusterCIDR6 = orDefault(s.ClusterCIDR6, DefaultClusterCIDR6)
		s.ServiceCIDR6 = orDefault(s.ServiceCIDR6, DefaultServiceCIDR6)
		if s.NodeCIDRBits6 == 0 {
			s.NodeCIDRBits6 = DefaultNodeCIDRBits6
		}
	}
	return s
}

func orDefault(p, def netip.Prefix) netip.Prefix {
	if p.IsValid() {
		return p
	}
	return def
}

// podCount returns the total number of pods of a defaulted spec.
func (s Spec) podCount() int {
	if s.Pods > 0 {
		return s.Pods
	}
	return s.Nodes * s.PodsPerNode
}

// validate checks a defaulted spec. Address arithmetic is checked by NewPlan.
func (s Spec) validate() error {
	switch {
	case s.Nodes < 1:
		return fmt.Errorf("nodes must be at least 1, got %d", s.Nodes)
	case s.Pods < 0 || s.PodsPerNode < 0:
		return fmt.Errorf("pod counts must not be negative (pods=%d, podsPerNode=%d)", s.Pods, s.PodsPerNode)
	case s.NoPodBridge && (s.Pods > 0 || s.PodsPerNode > 0):
		return fmt.Errorf("noPodBridge leaves pods to a CNI plugin: pods (%d) and podsPerNode (%d) must be zero", s.Pods, s.PodsPerNode)
	case s.Pods > 0 && s.PodsPerNode > 0:
		return fmt.Errorf("set either pods (%d) or podsPerNode (%d), not both", s.Pods, s.PodsPerNode)
	case s.GatewayNode < 0 || s.GatewayNode >= s.Nodes:
		return fmt.Errorf("gatewayNode %d out of range [0,%d)", s.GatewayNode, s.Nodes)
	case !prefixPattern.MatchString(s.Prefix):
		return fmt.Errorf("prefix %q must match %s", s.Prefix, prefixPattern)
	}
	if err := checkFamily(false, map[string]netip.Prefix{
		"networkCIDR": s.NetworkCIDR, "clusterCIDR": s.ClusterCIDR, "serviceCIDR": s.ServiceCIDR,
	}); err != nil {
		return err
	}
	if err := checkDisjoint(s.NetworkCIDR, s.ClusterCIDR, s.ServiceCIDR); err != nil {
		return err
	}
	if s.NodeCIDRBits < s.ClusterCIDR.Bits() || s.NodeCIDRBits > 30 {
		return fmt.Errorf("nodeCIDRBits %d must be within [%d,30]", s.NodeCIDRBits, s.ClusterCIDR.Bits())
	}
	return s.validate6()
}

// validate6 checks the IPv6 half of a defaulted spec.
func (s Spec) validate6() error {
	v6 := map[string]netip.Prefix{
		"networkCIDR6": s.NetworkCIDR6, "clusterCIDR6": s.ClusterCIDR6, "serviceCIDR6": s.ServiceCIDR6,
	}
	if !s.DualStack {
		for name, p := range v6 {
			if p.IsValid() {
				return fmt.Errorf("%s %s is set without dualStack", name, p)
			}
		}
		if s.NodeCIDRBits6 != 0 {
			return fmt.Errorf("nodeCIDRBits6 %d is set without dualStack", s.NodeCIDRBits6)
		}
		return nil
	}
	if err := checkFamily(true, v6); err != nil {
		return err
	}
	if err := checkDisjoint(s.NetworkCIDR6, s.ClusterCIDR6, s.ServiceCIDR6); err != nil {
		return err
	}
	// A node CIDR longer than /120 leaves too few pods; shorter than the
	// cluster CIDR cannot be cut from it.
	if s.NodeCIDRBits6 < s.ClusterCIDR6.Bits() || s.NodeCIDRBits6 > 120 {
		return fmt.Errorf("nodeCIDRBits6 %d must be within [%d,120]", s.NodeCIDRBits6, s.ClusterCIDR6.Bits())
	}
	return nil
}

// checkFamily wants every prefix masked and of one family: IPv6 when v6,
// else IPv4 (IPv4-mapped IPv6 counts as neither).
func checkFamily(v6 bool, prefixes map[string]netip.Prefix) error {
	for name, p := range prefixes {
		if p.Addr().Is6() != v6 || p.Addr().Is4In6() {
			want := "IPv4 (IPv6 goes in the *6 fields, with dualStack)"
			if v6 {
				want = "IPv6"
			}
			return fmt.Errorf("%s %s: must be %s", name, p, want)
		}
		if p != p.Masked() {
			return fmt.Errorf("%s %s has host bits set (want %s)", name, p, p.Masked())
		}
	}
	return nil
}

// checkDisjoint wants the network, cluster and service CIDRs of one
// family not to overlap.
func checkDisjoint(network, cluster, service netip.Prefix) error {
	for _, p := range [][2]netip.Prefix{{network, cluster}, {network, service}, {cluster, service}} {
		if p[0].Overlaps(p[1]) {
			return fmt.Errorf("%s overlaps %s", p[0], p[1])
		}
	}
	return nil
}
