package slices

import (
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
)

// ManagedBy is the endpointslice.kubernetes.io/managed-by value of slices
// written by this package. The upstream controller uses
// "endpointslice-controller.k8s.io".
const ManagedBy = "switchyard-testbed"

// Slice describes one EndpointSlice of a Service.
type Slice struct {
	Namespace string
	Service   string // name of the owning Service
	Suffix    string // the slice is named <Service>-<Suffix>
	// AddressType defaults to IPv4.
	AddressType discoveryv1.AddressType
	Ports       []Port
	Endpoints   []Endpoint
}

// Name is the object name of the slice.
func (s Slice) Name() string { return Name(s.Service, s.Suffix) }

// Name returns the object name of the slice of service with suffix.
func Name(service, suffix string) string { return service + "-" + suffix }

// Port is a friendly discoveryv1.EndpointPort. The zero Protocol means TCP,
// an empty Name is the unnamed port (valid only when it is the only one).
type Port struct {
	Name        string
	Port        int32
	Protocol    corev1.Protocol
	AppProtocol string
}

// TCP returns a TCP port.
func TCP(name string, port int32) Port {
	return Port{Name: name, Port: port, Protocol: corev1.ProtocolTCP}
}

// UDP returns a UDP port.
func UDP(name string, port int32) Port {
	return Port{Name: name, Port: port, Protocol: corev1.ProtocolUDP}
}

// SCTP returns an SCTP port.
func SCTP(name string, port int32) Port {
	return Port{Name: name, Port: port, Protocol: corev1.ProtocolSCTP}
}

// Endpoint is a friendly discoveryv1.Endpoint. Nil conditions are left
// unset, which consumers read as "unknown" (ready and serving default to
// true, terminating to false). The constructors Ready, NotReady and
// Terminating set all three the way the controller derives them from a pod.
type Endpoint struct {
	Addresses   []string
	Ready       *bool
	Serving     *bool
	Terminating *bool
	NodeName    string
	Zone        string
	Hostname    string
	// ForZones and ForNodes become hints.forZones / hints.forNodes.
	ForZones []string
	ForNodes []string
	// TargetRef, if set, is copied as is (usually a Pod reference).
	TargetRef *corev1.ObjectReference
}

// Ready is a running, ready pod: ready, serving, not terminating.
func Ready(addresses ...string) Endpoint {
	return conditions(true, true, false, addresses)
}

// NotReady is a running pod failing its readiness probe.
func NotReady(addresses ...string) Endpoint {
	return conditions(false, false, false, addresses)
}

// Terminating is a pod being deleted; upstream never marks it ready, and
// serving says whether it still passes its readiness probe.
func Terminating(serving bool, addresses ...string) Endpoint {
	return conditions(false, serving, true, addresses)
}

func conditions(ready, serving, terminating bool, addresses []string) Endpoint {
	return Endpoint{Addresses: addresses, Ready: &ready, Serving: &serving, Terminating: &terminating}
}

// OnNode returns e with NodeName set.
func (e Endpoint) OnNode(node string) Endpoint { e.NodeName = node; return e }

// InZone returns e with Zone set.
func (e Endpoint) InZone(zone string) Endpoint { e.Zone = zone; return e }

// WithHostname returns e with Hostname set.
func (e Endpoint) WithHostname(hostname string) Endpoint { e.Hostname = hostname; return e }

// WithZoneHints returns e with hints.forZones set to zones.
func (e Endpoint) WithZoneHints(zones ...string) Endpoint { e.ForZones = zones; return e }

// WithNodeHints returns e with hints.forNodes set to nodes.
func (e Endpoint) WithNodeHints(nodes ...string) Endpoint { e.ForNodes = nodes; return e }
