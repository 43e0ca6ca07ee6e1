package nodeview

import (
	"fmt"
	"strings"
	"unicode/utf8"

	"google.golang.org/protobuf/proto"

	"github.com/switchyard-proxy/switchyard/controlplane/internal/model"
	switchyardv1 "github.com/switchyard-proxy/switchyard/proto/switchyard/v1"
)

// baseView converts the node-independent part of a service.
func baseView(svc *model.Service, m merged) *switchyardv1.ServiceView {
	sv := &switchyardv1.ServiceView{
		Namespace:                text(svc.Key.Namespace),
		Name:                     text(svc.Key.Name),
		Type:                     serviceType(svc.Type),
		ClusterIps:               stringsOf(svc.ClusterIPs),
		ExternalIps:              stringsOf(svc.ExternalIPs),
		LoadBalancerIps:          stringsOf(svc.LoadBalancerIPs),
		LoadBalancerSourceRanges: stringsOf(svc.LoadBalancerSourceRanges),
		SessionAffinity:          switchyardv1.SessionAffinity_SESSION_AFFINITY_NONE,
		ExternalTrafficPolicy:    trafficPolicy(svc.ExternalPolicy),
		InternalTrafficPolicy:    trafficPolicy(svc.InternalPolicy),
		HasAnyEndpoints:          m.hasAny,
	}
	if svc.AffinityTimeoutSeconds > 0 {
		sv.SessionAffinity = switchyardv1.SessionAffinity_SESSION_AFFINITY_CLIENT_IP
		sv.SessionAffinityTimeoutSeconds = svc.AffinityTimeoutSeconds
	}
	if svc.Type == model.TypeLoadBalancer && svc.ExternalPolicy == model.PolicyLocal {
		sv.HealthCheckNodePort = uint32(svc.HealthCheckNodePort)
	}
	if len(svc.Ports) > 0 {
		sv.Ports = make([]*switchyardv1.ServicePort, len(svc.Ports))
		for i, p := range svc.Ports {
			sv.Ports[i] = &switchyardv1.ServicePort{
				Name:     text(p.Name),
				Protocol: protocol(p.Protocol),
				Port:     uint32(p.Port),
				NodePort: uint32(p.NodePort),
				// Always set, false included: presence is what tells an
				// agent the view decides per port (service_view.proto).
				HasAnyEndpoints: proto.Bool(m.hasAnyByPort[i]),
			}
		}
	}
	return sv
}

func serviceType(t model.ServiceType) switchyardv1.ServiceType {
	switch t {
	case model.TypeClusterIP:
		return switchyardv1.ServiceType_SERVICE_TYPE_CLUSTER_IP
	case model.TypeNodePort:
		return switchyardv1.ServiceType_SERVICE_TYPE_NODE_PORT
	case model.TypeLoadBalancer:
		return switchyardv1.ServiceType_SERVICE_TYPE_LOAD_BALANCER
	}
	return switchyardv1.ServiceType_SERVICE_TYPE_UNSPECIFIED
}

func protocol(p model.Protocol) switchyardv1.Protocol {
	switch p {
	case model.ProtocolTCP:
		return switchyardv1.Protocol_PROTOCOL_TCP
	case model.ProtocolUDP:
		return switchyardv1.Protocol_PROTOCOL_UDP
	case model.ProtocolSCTP:
		return switchyardv1.Protocol_PROTOCOL_SCTP
	}
	return switchyardv1.Protocol_PROTOCOL_UNSPECIFIED
}

// trafficPolicy maps a policy; anything but Local (including unset) is
// Cluster, the API default.
func trafficPolicy(p model.TrafficPolicy) switchyardv1.TrafficPolicy {
	if p == model.PolicyLocal {
		return switchyardv1.TrafficPolicy_TRAFFIC_POLICY_LOCAL
	}
	return switchyardv1.TrafficPolicy_TRAFFIC_POLICY_CLUSTER
}

// stringsOf formats addresses or prefixes; none is nil, as the view leaves
// an empty list unset.
func stringsOf[T fmt.Stringer](xs []T) []string {
	if len(xs) == 0 {
		return nil
	}
	out := make([]string, len(xs))
	for i, x := range xs {
		out[i] = x.String()
	}
	return out
}

// text makes s valid UTF-8, as protobuf strings must be, so that encoding
// a view can never fail. Validated input is returned unchanged.
func text(s string) string {
	if utf8.ValidString(s) {
		return s
	}
	return strings.ToValidUTF8(s, "\uFFFD")
}
