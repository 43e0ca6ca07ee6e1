package translate

import (
	corev1 "k8s.io/api/core/v1"

	"github.com/switchyard-proxy/switchyard/controlplane/internal/model"
	"github.com/switchyard-proxy/switchyard/dataplane/serviceport"
)

// maxAffinityTimeoutSeconds is the API's upper bound for ClientIP affinity.
const maxAffinityTimeoutSeconds = 86400

// servicePorts returns the service's usable ports. A duplicate (same name,
// or same protocol and port) keeps the first; node ports are kept only for
// NodePort and LoadBalancer services, and only once per protocol.
func servicePorts(svc *corev1.Service, typ model.ServiceType, t tally) []model.ServicePort {
	var (
		out       []model.ServicePort
		names     = map[string]struct{}{}
		ports     = map[portKey]struct{}{}
		nodePorts = map[portKey]struct{}{}
	)
	for i := range svc.Spec.Ports {
		if len(out) == model.MaxPortsPerService {
			t.drop(ReasonTooManyPorts)
			break
		}
		sp := &svc.Spec.Ports[i]
		proto, ok := protocol(sp.Protocol)
		if !ok {
			t.drop(ReasonUnsupportedProtocol)
			continue
		}
		port, ok := portNumber(sp.Port)
		if !ok {
			t.drop(ReasonInvalidPort)
			continue
		}
		if serviceport.CheckPortName(sp.Name) != nil {
			t.drop(ReasonInvalidPortName)
			continue
		}
		key := portKey{protocol: proto, port: port}
		_, dupName := names[sp.Name]
		_, dupPort := ports[key]
		if dupName || dupPort {
			t.drop(ReasonDuplicatePort)
			continue
		}
		names[sp.Name] = struct{}{}
		ports[key] = struct{}{}
		nodePort := nodePortOf(sp, proto, typ, nodePorts, t)
		out = append(out, model.ServicePort{Name: sp.Name, Protocol: proto, Port: port, NodePort: nodePort})
	}
	return out
}

// nodePortOf returns the node port of sp when its service type has node
// ports and the value is valid and not already taken for the protocol.
func nodePortOf(sp *corev1.ServicePort, proto model.Protocol, typ model.ServiceType, taken map[portKey]struct{}, t tally) uint16 {
	if sp.NodePort == 0 {
		return 0
	}
	if typ == model.TypeClusterIP {
		t.drop(ReasonFieldNotApplicable)
		return 0
	}
	nodePort, ok := portNumber(sp.NodePort)
	if !ok {
		t.drop(ReasonInvalidNodePort)
		return 0
	}
	key := portKey{protocol: proto, port: nodePort}
	if _, dup := taken[key]; dup {
		t.drop(ReasonDuplicateNodePort)
		return 0
	}
	taken[key] = struct{}{}
	return nodePort
}

// affinityTimeout returns the ClientIP affinity timeout, 0 for none. An
// unset timeout is the API default; an out-of-range one is clamped.
func affinityTimeout(svc *corev1.Service, t tally) uint32 {
	switch svc.Spec.SessionAffinity {
	case corev1.ServiceAffinityNone, "":
		return 0
	case corev1.ServiceAffinityClientIP:
	default:
		t.drop(ReasonInvalidAffinity)
		return 0
	}
	cfg := svc.Spec.SessionAffinityConfig
	if cfg == nil || cfg.ClientIP == nil || cfg.ClientIP.TimeoutSeconds == nil {
		return uint32(corev1.DefaultClientIPServiceAffinitySeconds)
	}
	switch timeout := *cfg.ClientIP.TimeoutSeconds; {
	case timeout <= 0:
		t.drop(ReasonInvalidAffinity)
		return uint32(corev1.DefaultClientIPServiceAffinitySeconds)
	case timeout > maxAffinityTimeoutSeconds:
		t.drop(ReasonInvalidAffinity)
		return maxAffinityTimeoutSeconds
	default:
		return uint32(timeout)
	}
}

// externalPolicy is Local only for an externally accessible service that
// asks for it, as kube-proxy's ExternalPolicyLocal.
func externalPolicy(svc *corev1.Service, accessible bool, t tally) model.TrafficPolicy {
	switch svc.Spec.ExternalTrafficPolicy {
	case corev1.ServiceExternalTrafficPolicyCluster, "":
		return model.PolicyCluster
	case corev1.ServiceExternalTrafficPolicyLocal:
		if !accessible {
			t.drop(ReasonFieldNotApplicable)
			return model.PolicyCluster
		}
		return model.PolicyLocal
	}
	t.drop(ReasonInvalidTrafficPolicy)
	return model.PolicyCluster
}

func internalPolicy(svc *corev1.Service, t tally) model.TrafficPolicy {
	itp := svc.Spec.InternalTrafficPolicy
	if itp == nil {
		return model.PolicyCluster
	}
	switch *itp {
	case corev1.ServiceInternalTrafficPolicyCluster:
		return model.PolicyCluster
	case corev1.ServiceInternalTrafficPolicyLocal:
		return model.PolicyLocal
	}
	t.drop(ReasonInvalidTrafficPolicy)
	return model.PolicyCluster
}

// healthCheckNodePort is kept only where kube-proxy serves it: on a
// LoadBalancer service whose external policy is Local.
func healthCheckNodePort(svc *corev1.Service, typ model.ServiceType, etp model.TrafficPolicy, t tally) uint16 {
	raw := svc.Spec.HealthCheckNodePort
	if typ != model.TypeLoadBalancer || etp != model.PolicyLocal {
		if raw != 0 {
			t.drop(ReasonFieldNotApplicable)
		}
		return 0
	}
	port, ok := portNumber(raw)
	if !ok {
		t.drop(ReasonInvalidHealthCheckNodePort)
		return 0
	}
	return port
}

func trafficDistribution(svc *corev1.Service, t tally) string {
	td := svc.Spec.TrafficDistribution
	if td == nil || *td == "" {
		return ""
	}
	switch *td {
	case model.DistributionPreferClose, model.DistributionPreferSameZone, model.DistributionPreferSameNode:
		return *td
	}
	t.drop(ReasonUnknownTrafficDistribution)
	return ""
}

// loadBalancing reads the switchyard.io/load-balancing annotation: an
// algorithm name, or "" when absent. An unknown name is dropped (the
// cluster default applies) and reported, as an unknown
// trafficDistribution is: a typo must show, not fail the service.
func loadBalancing(svc *corev1.Service, t tally) string {
	name, ok := svc.Annotations[serviceport.AnnotationLoadBalancing]
	if !ok {
		return ""
	}
	if _, err := serviceport.ParseLoadBalancing(name); err != nil {
		t.drop(ReasonUnknownLoadBalancing)
		return ""
	}
	return name
}
