package model

import (
	"net/netip"
	"time"
)

// ServiceKey names a service.
type ServiceKey struct {
	Namespace string
	Name      string
}

// String returns "namespace/name", the resource name of its view.
func (k ServiceKey) String() string { return k.Namespace + "/" + k.Name }

// Protocol is a transport protocol of a port.
type Protocol uint8

// Protocols a service proxy programs.
const (
	ProtocolTCP Protocol = iota + 1
	ProtocolUDP
	ProtocolSCTP
)

// String returns the Kubernetes spelling.
func (p Protocol) String() string {
	switch p {
	case ProtocolTCP:
		return "TCP"
	case ProtocolUDP:
		return "UDP"
	case ProtocolSCTP:
		return "SCTP"
	}
	return "unknown"
}

// ServiceType is the kind of service, restricted to those a proxy programs
// (headless and ExternalName services never become a model.Service).
type ServiceType uint8

// Service types.
const (
	TypeClusterIP ServiceType = iota + 1
	TypeNodePort
	TypeLoadBalancer
)

// TrafficPolicy is a service's internal or external traffic policy.
type TrafficPolicy uint8

// Traffic policies.
const (
	PolicyCluster TrafficPolicy = iota + 1
	PolicyLocal
)

// TrafficDistribution values of spec.trafficDistribution that change
// endpoint selection.
const (
	DistributionPreferClose    = "PreferClose"
	DistributionPreferSameZone = "PreferSameZone"
	DistributionPreferSameNode = "PreferSameNode"
)

// Service is one proxied Service.
type Service struct {
	Key  ServiceKey
	Type ServiceType
	// ClusterIPs, primary first; at most one per family.
	ClusterIPs               []netip.Addr
	ExternalIPs              []netip.Addr
	LoadBalancerIPs          []netip.Addr
	LoadBalancerSourceRanges []netip.Prefix
	Ports                    []ServicePort
	// AffinityTimeoutSeconds > 0 means ClientIP session affinity.
	AffinityTimeoutSeconds uint32
	// ExternalPolicy is Local only when the service is reachable from
	// outside (NodePort, LoadBalancer or external IPs) and asks for Local.
	ExternalPolicy      TrafficPolicy
	InternalPolicy      TrafficPolicy
	HealthCheckNodePort uint16
	// TrafficDistribution is spec.trafficDistribution, "" when unset.
	TrafficDistribution string
	// LoadBalancing is the algorithm the service's
	// switchyard.io/load-balancing annotation names (random,
	// round-robin, maglev, source-hash); "" when it names none, and the
	// cluster default applies.
	LoadBalancing string
}

// ServicePort is one port of a service. Endpoints serve it on the port of
// the same name (and protocol) in their EndpointSlices: that is how named
// target ports are resolved.
type ServicePort struct {
	Name     string
	Protocol Protocol
	Port     uint16
	NodePort uint16
}

// IPFamily is an address family of an EndpointSlice.
type IPFamily uint8

// Address families.
const (
	IPv4 IPFamily = 4
	IPv6 IPFamily = 6
)

// SliceKey names an EndpointSlice.
type SliceKey struct {
	Namespace string
	Name      string
}

// EndpointSlice is one EndpointSlice of a service.
type EndpointSlice struct {
	Key     SliceKey
	Service ServiceKey
	Family  IPFamily
	Ports   []EndpointPort
	// Endpoints, at most MaxEndpointsPerSlice.
	Endpoints []Endpoint
	// TriggerTime is the endpoints.kubernetes.io/last-change-trigger-time
	// annotation; zero when absent.
	TriggerTime time.Time
}

// EndpointPort is one port of an EndpointSlice: Name matches a service
// port's name, Port is the target port the endpoints listen on.
type EndpointPort struct {
	Name     string
	Protocol Protocol
	Port     uint16
}

// Endpoint is one backend. Only the first address of an API endpoint is
// used, as kube-proxy does.
type Endpoint struct {
	Address     netip.Addr
	Ready       bool
	Serving     bool
	Terminating bool
	NodeName    string
	Zone        string
	// Hints; nil when the endpoint carries none.
	HintZones []string
	HintNodes []string
}

// Node is one cluster node.
type Node struct {
	Name      string
	Zone      string
	Addresses []netip.Addr
	// Labels are the Node's labels under LabelPrefix only (the ones that
	// steer Switchyard): a heartbeat or an unrelated label change must not
	// change the model. Nil when it has none.
	Labels map[string]string
}

// LabelPrefix is the prefix of the Node labels Node.Labels keeps.
const LabelPrefix = "switchyard.io/"

// ServiceCIDR is one ServiceCIDR object (networking.k8s.io/v1): a range
// the cluster allocates Service cluster IPs from.
type ServiceCIDR struct {
	Name string
	// CIDRs are its spec.cidrs, at most one per family, masked.
	CIDRs []netip.Prefix
}

// Limits that keep one bad object from costing the control plane or an
// agent more than a well-formed one could. They match the API server's own
// validation limits, so well-formed objects are never clamped.
const (
	MaxEndpointsPerSlice = 1000
	MaxPortsPerSlice     = 100
	MaxPortsPerService   = 10000
)

// State is the whole cluster as the control plane sees it at one moment.
// Callers treat a State as immutable once handed to a computation.
type State struct {
	Services map[ServiceKey]*Service
	// Slices by service, then by slice name.
	Slices map[ServiceKey]map[SliceKey]*EndpointSlice
	Nodes  map[string]*Node
	// ServiceCIDRs by object name.
	ServiceCIDRs map[string]*ServiceCIDR
}

// NewState returns an empty state.
func NewState() *State {
	return &State{
		Services: map[ServiceKey]*Service{},
		Slices:   map[ServiceKey]map[SliceKey]*EndpointSlice{},
		Nodes:    map[string]*Node{},

		ServiceCIDRs: map[string]*ServiceCIDR{},
	}
}
