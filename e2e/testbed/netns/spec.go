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
	return s
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
	for name, p := range map[string]netip.Prefix{
		"networkCIDR": s.NetworkCIDR, "clusterCIDR": s.ClusterCIDR, "serviceCIDR": s.ServiceCIDR,
	} {
		if !p.Addr().Is4() {
			return fmt.Errorf("%s %s: only IPv4 is supported", name, p)
		}
		if p != p.Masked() {
			return fmt.Errorf("%s %s has host bits set (want %s)", name, p, p.Masked())
		}
	}
	pairs := [][2]netip.Prefix{
		{s.NetworkCIDR, s.ClusterCIDR}, {s.NetworkCIDR, s.ServiceCIDR}, {s.ClusterCIDR, s.ServiceCIDR},
	}
	for _, p := range pairs {
		if p[0].Overlaps(p[1]) {
			return fmt.Errorf("%s overlaps %s", p[0], p[1])
		}
	}
	if s.NodeCIDRBits < s.ClusterCIDR.Bits() || s.NodeCIDRBits > 30 {
		return fmt.Errorf("nodeCIDRBits %d must be within [%d,30]", s.NodeCIDRBits, s.ClusterCIDR.Bits())
	}
	return nil
}
