package translate

import (
	"fmt"
	"net/netip"

	"github.com/google/go-cmp/cmp"

	"github.com/switchyard-proxy/switchyard/controlplane/internal/model"
)

// cmpOpts compares model values: netip types have unexported fields.
var cmpOpts = cmp.Options{
	cmp.Comparer(func(a, b netip.Addr) bool { return a == b }),
	cmp.Comparer(func(a, b netip.Prefix) bool { return a == b }),
}

// checkAddr checks an address is one translate may emit.
func checkAddr(what string, a netip.Addr) error {
	switch {
	case !a.IsValid():
		return fmt.Errorf("%s: invalid address", what)
	case a.Zone() != "":
		return fmt.Errorf("%s %s: has a zone", what, a)
	case a.Is4In6():
		return fmt.Errorf("%s %s: IPv4-mapped", what, a)
	case a.IsUnspecified():
		return fmt.Errorf("%s %s: unspecified", what, a)
	}
	return nil
}

func knownProtocol(p model.Protocol) bool {
	return p == model.ProtocolTCP || p == model.ProtocolUDP || p == model.ProtocolSCTP
}

// checkService checks the invariants of model/doc.go and the rules of
// package translate on one service.
func checkService(s *model.Service) error {
	if s.Key.Namespace == "" || s.Key.Name == "" {
		return fmt.Errorf("empty key %v", s.Key)
	}
	if s.Type < model.TypeClusterIP || s.Type > model.TypeLoadBalancer {
		return fmt.Errorf("type %d", s.Type)
	}
	if err := checkClusterIPs(s.ClusterIPs); err != nil {
		return err
	}
	served := map[bool]bool{}
	for _, a := range s.ClusterIPs {
		served[a.Is4()] = true
	}
	for _, list := range [][]netip.Addr{s.ExternalIPs, s.LoadBalancerIPs} {
		seen := map[netip.Addr]bool{}
		for _, a := range list {
			if err := checkAddr("external/LB IP", a); err != nil {
				return err
			}
			if !served[a.Is4()] || seen[a] {
				return fmt.Errorf("external/LB IP %s: family not served or duplicate", a)
			}
			seen[a] = true
		}
	}
	if s.Type != model.TypeLoadBalancer && (len(s.LoadBalancerIPs) > 0 || len(s.LoadBalancerSourceRanges) > 0) {
		return fmt.Errorf("load-balancer fields on type %d", s.Type)
	}
	for _, p := range s.LoadBalancerSourceRanges {
		if !p.IsValid() || p != p.Masked() || p.Addr().Is4In6() || !served[p.Addr().Is4()] {
			return fmt.Errorf("source range %s", p)
		}
	}
	if err := checkServicePorts(s); err != nil {
		return err
	}
	return checkServicePolicies(s)
}

func checkClusterIPs(ips []netip.Addr) error {
	if len(ips) == 0 || len(ips) > 2 {
		return fmt.Errorf("%d cluster IPs", len(ips))
	}
	for _, a := range ips {
		if err := checkAddr("cluster IP", a); err != nil {
			return err
		}
	}
	if len(ips) == 2 && ips[0].Is4() == ips[1].Is4() {
		return fmt.Errorf("two cluster IPs of one family: %v", ips)
	}
	return nil
}

func checkServicePorts(s *model.Service) error {
	if len(s.Ports) > model.MaxPortsPerService {
		return fmt.Errorf("%d ports", len(s.Ports))
	}
	names := map[string]bool{}
	ports := map[portKey]bool{}
	for _, p := range s.Ports {
		key := portKey{protocol: p.Protocol, port: p.Port}
		switch {
		case !knownProtocol(p.Protocol):
			return fmt.Errorf("port %v: protocol", p)
		case p.Port == 0:
			return fmt.Errorf("port %v: zero", p)
		case names[p.Name] || ports[key]:
			return fmt.Errorf("port %v: duplicate", p)
		case p.NodePort != 0 && s.Type == model.TypeClusterIP:
			return fmt.Errorf("port %v: node port on ClusterIP", p)
		}
		names[p.Name] = true
		ports[key] = true
	}
	return nil
}

func checkServicePolicies(s *model.Service) error {
	accessible := s.Type != model.TypeClusterIP || len(s.ExternalIPs) > 0
	switch {
	case s.ExternalPolicy != model.PolicyCluster && s.ExternalPolicy != model.PolicyLocal:
		return fmt.Errorf("external policy %d", s.ExternalPolicy)
	case s.InternalPolicy != model.PolicyCluster && s.InternalPolicy != model.PolicyLocal:
		return fmt.Errorf("internal policy %d", s.InternalPolicy)
	case s.ExternalPolicy == model.PolicyLocal && !accessible:
		return fmt.Errorf("external policy Local on a service not externally accessible")
	case s.HealthCheckNodePort != 0 && (s.Type != model.TypeLoadBalancer || s.ExternalPolicy != model.PolicyLocal):
		return fmt.Errorf("health-check node port %d where none applies", s.HealthCheckNodePort)
	case s.AffinityTimeoutSeconds > maxAffinityTimeoutSeconds:
		return fmt.Errorf("affinity timeout %d", s.AffinityTimeoutSeconds)
	}
	switch s.TrafficDistribution {
	case "", model.DistributionPreferClose, model.DistributionPreferSameZone, model.DistributionPreferSameNode:
		return nil
	}
	return fmt.Errorf("traffic distribution %q", s.TrafficDistribution)
}

// checkSlice checks the invariants of model/doc.go on one slice.
func checkSlice(s *model.EndpointSlice) error {
	if s.Key.Namespace == "" || s.Key.Name == "" || s.Service.Name == "" || s.Service.Namespace != s.Key.Namespace {
		return fmt.Errorf("keys %v %v", s.Key, s.Service)
	}
	if s.Family != model.IPv4 && s.Family != model.IPv6 {
		return fmt.Errorf("family %d", s.Family)
	}
	if len(s.Ports) > model.MaxPortsPerSlice || len(s.Endpoints) > model.MaxEndpointsPerSlice {
		return fmt.Errorf("%d ports, %d endpoints", len(s.Ports), len(s.Endpoints))
	}
	seenPorts := map[model.EndpointPort]bool{}
	for _, p := range s.Ports {
		key := model.EndpointPort{Name: p.Name, Protocol: p.Protocol}
		if !knownProtocol(p.Protocol) || p.Port == 0 || seenPorts[key] {
			return fmt.Errorf("port %v", p)
		}
		seenPorts[key] = true
	}
	seen := map[netip.Addr]bool{}
	for _, ep := range s.Endpoints {
		if err := checkAddr("endpoint", ep.Address); err != nil {
			return err
		}
		if familyOf(ep.Address) != s.Family || seen[ep.Address] {
			return fmt.Errorf("endpoint %s: wrong family or duplicate", ep.Address)
		}
		seen[ep.Address] = true
		if (ep.HintZones != nil && len(ep.HintZones) == 0) || (ep.HintNodes != nil && len(ep.HintNodes) == 0) {
			return fmt.Errorf("endpoint %s: empty non-nil hints", ep.Address)
		}
	}
	if !s.TriggerTime.IsZero() && s.TriggerTime.Location() != nil && s.TriggerTime.Location().String() != "UTC" {
		return fmt.Errorf("trigger time %v not UTC", s.TriggerTime)
	}
	return nil
}

// checkNode checks one node.
func checkNode(n *model.Node) error {
	if n.Name == "" {
		return fmt.Errorf("empty node name")
	}
	seen := map[netip.Addr]bool{}
	for _, a := range n.Addresses {
		if err := checkAddr("node address", a); err != nil {
			return err
		}
		if seen[a] {
			return fmt.Errorf("node address %s: duplicate", a)
		}
		seen[a] = true
	}
	return nil
}
