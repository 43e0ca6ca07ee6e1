package translate

import (
	"fmt"
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/switchyard-proxy/switchyard/controlplane/internal/model"
	"github.com/switchyard-proxy/switchyard/dataplane/serviceport"
)

func withPorts(ports ...corev1.ServicePort) func(*corev1.Service) {
	return func(s *corev1.Service) { s.Spec.Ports = ports }
}

func wantPorts(ports ...model.ServicePort) func(*model.Service) {
	return func(s *model.Service) { s.Ports = ports }
}

// manyServicePorts returns more ports than a service may have, and the
// ports a translation keeps of them.
func manyServicePorts() ([]corev1.ServicePort, []model.ServicePort) {
	in := make([]corev1.ServicePort, model.MaxPortsPerService+5)
	want := make([]model.ServicePort, model.MaxPortsPerService)
	for i := range in {
		in[i] = corev1.ServicePort{Name: fmt.Sprintf("p%d", i), Protocol: corev1.ProtocolTCP, Port: int32(i + 1)}
		if i < model.MaxPortsPerService {
			want[i] = model.ServicePort{Name: fmt.Sprintf("p%d", i), Protocol: model.ProtocolTCP, Port: uint16(i + 1)}
		}
	}
	return in, want
}

func TestServicePorts(t *testing.T) {
	tcp, udp, sctp := model.ProtocolTCP, model.ProtocolUDP, model.ProtocolSCTP
	manyIn, manyWant := manyServicePorts()
	runServiceCases(t, []serviceCase{
		{
			name: "protocols: UDP, SCTP, empty is TCP, others dropped",
			in: testService(withPorts(
				corev1.ServicePort{Name: "dns", Protocol: corev1.ProtocolUDP, Port: 53},
				corev1.ServicePort{Name: "sig", Protocol: corev1.ProtocolSCTP, Port: 9},
				corev1.ServicePort{Name: "web", Port: 80},
				corev1.ServicePort{Name: "http", Protocol: "HTTP", Port: 8080},
				corev1.ServicePort{Name: "low", Protocol: "tcp", Port: 8081},
			)),
			want: wantService(wantPorts(
				model.ServicePort{Name: "dns", Protocol: udp, Port: 53},
				model.ServicePort{Name: "sig", Protocol: sctp, Port: 9},
				model.ServicePort{Name: "web", Protocol: tcp, Port: 80},
			)),
			wantCounts: "Service/UnsupportedProtocol=2",
		},
		{
			name: "port out of range dropped",
			in: testService(withPorts(
				corev1.ServicePort{Name: "zero", Port: 0},
				corev1.ServicePort{Name: "neg", Port: -1},
				corev1.ServicePort{Name: "big", Port: 65536},
				corev1.ServicePort{Name: "max", Port: 65535},
			)),
			want:       wantService(wantPorts(model.ServicePort{Name: "max", Protocol: tcp, Port: 65535})),
			wantCounts: "Service/InvalidPort=3",
		},
		{
			name: "duplicates by name or by protocol and port keep the first",
			in: testService(withPorts(
				corev1.ServicePort{Name: "a", Protocol: corev1.ProtocolTCP, Port: 80},
				corev1.ServicePort{Name: "a", Protocol: corev1.ProtocolUDP, Port: 81},
				corev1.ServicePort{Name: "b", Protocol: corev1.ProtocolTCP, Port: 80},
				corev1.ServicePort{Name: "c", Protocol: corev1.ProtocolUDP, Port: 80},
			)),
			want: wantService(wantPorts(
				model.ServicePort{Name: "a", Protocol: tcp, Port: 80},
				model.ServicePort{Name: "c", Protocol: udp, Port: 80},
			)),
			wantCounts: "Service/DuplicatePort=2",
		},
		{
			name: "two unnamed ports are duplicates by name",
			in: testService(withPorts(
				corev1.ServicePort{Port: 80},
				corev1.ServicePort{Port: 443},
			)),
			want:       wantService(wantPorts(model.ServicePort{Protocol: tcp, Port: 80})),
			wantCounts: "Service/DuplicatePort=1",
		},
		{
			name: "odd port names dropped",
			in: testService(withPorts(
				corev1.ServicePort{Name: "has space", Port: 80},
				corev1.ServicePort{Name: "UPPER", Port: 81},
				corev1.ServicePort{Name: "-lead", Port: 82},
				corev1.ServicePort{Name: "ok-1", Port: 83},
			)),
			want:       wantService(wantPorts(model.ServicePort{Name: "ok-1", Protocol: tcp, Port: 83})),
			wantCounts: "Service/InvalidPortName=3",
		},
		{
			name:       "huge port list clamped",
			in:         testService(withPorts(manyIn...)),
			want:       wantService(wantPorts(manyWant...)),
			wantCounts: "Service/TooManyPorts=1",
		},
		{
			name:       "all ports dropped keeps the service",
			in:         testService(withPorts(corev1.ServicePort{Name: "x", Protocol: "ICMP", Port: 1})),
			want:       wantService(func(s *model.Service) { s.Ports = nil }),
			wantCounts: "Service/UnsupportedProtocol=1",
		},
	})
}

func TestServiceNodePorts(t *testing.T) {
	tcp, udp := model.ProtocolTCP, model.ProtocolUDP
	runServiceCases(t, []serviceCase{
		{
			name: "node ports kept on NodePort, invalid and duplicate ones cleared",
			in: testService(asType(corev1.ServiceTypeNodePort), withPorts(
				corev1.ServicePort{Name: "a", Port: 80, NodePort: 30080},
				corev1.ServicePort{Name: "b", Port: 81, NodePort: 70000},
				corev1.ServicePort{Name: "c", Port: 82, NodePort: 30080},
				corev1.ServicePort{Name: "d", Protocol: corev1.ProtocolUDP, Port: 82, NodePort: 30080},
				corev1.ServicePort{Name: "e", Port: 83},
			)),
			want: wantService(func(s *model.Service) { s.Type = model.TypeNodePort }, wantPorts(
				model.ServicePort{Name: "a", Protocol: tcp, Port: 80, NodePort: 30080},
				model.ServicePort{Name: "b", Protocol: tcp, Port: 81},
				model.ServicePort{Name: "c", Protocol: tcp, Port: 82},
				model.ServicePort{Name: "d", Protocol: udp, Port: 82, NodePort: 30080},
				model.ServicePort{Name: "e", Protocol: tcp, Port: 83},
			)),
			wantCounts: "Service/DuplicateNodePort=1 Service/InvalidNodePort=1",
		},
		{
			name: "node ports kept on LoadBalancer",
			in: testService(asType(corev1.ServiceTypeLoadBalancer),
				withPorts(corev1.ServicePort{Name: "a", Port: 80, NodePort: 31000})),
			want: wantService(func(s *model.Service) { s.Type = model.TypeLoadBalancer },
				wantPorts(model.ServicePort{Name: "a", Protocol: tcp, Port: 80, NodePort: 31000})),
		},
		{
			name:       "node port on ClusterIP dropped",
			in:         testService(withPorts(corev1.ServicePort{Name: "a", Port: 80, NodePort: 31000})),
			want:       wantService(wantPorts(model.ServicePort{Name: "a", Protocol: tcp, Port: 80})),
			wantCounts: "Service/FieldNotApplicable=1",
		},
	})
}

func affinity(kind corev1.ServiceAffinity, timeout *int32) func(*corev1.Service) {
	return func(s *corev1.Service) {
		s.Spec.SessionAffinity = kind
		if timeout != nil {
			s.Spec.SessionAffinityConfig = &corev1.SessionAffinityConfig{
				ClientIP: &corev1.ClientIPConfig{TimeoutSeconds: timeout},
			}
		}
	}
}

func wantAffinity(seconds uint32) func(*model.Service) {
	return func(s *model.Service) { s.AffinityTimeoutSeconds = seconds }
}

func TestServiceAffinity(t *testing.T) {
	runServiceCases(t, []serviceCase{
		{name: "None", in: testService(affinity(corev1.ServiceAffinityNone, nil)), want: wantService()},
		{
			name: "ClientIP without config defaults to 10800",
			in:   testService(affinity(corev1.ServiceAffinityClientIP, nil)),
			want: wantService(wantAffinity(10800)),
		},
		{
			name: "ClientIP with empty ClientIP config defaults to 10800",
			in: testService(affinity(corev1.ServiceAffinityClientIP, nil), func(s *corev1.Service) {
				s.Spec.SessionAffinityConfig = &corev1.SessionAffinityConfig{ClientIP: &corev1.ClientIPConfig{}}
			}),
			want: wantService(wantAffinity(10800)),
		},
		{
			name: "ClientIP with timeout",
			in:   testService(affinity(corev1.ServiceAffinityClientIP, ptr[int32](300))),
			want: wantService(wantAffinity(300)),
		},
		{
			name:       "ClientIP with zero timeout defaults",
			in:         testService(affinity(corev1.ServiceAffinityClientIP, ptr[int32](0))),
			want:       wantService(wantAffinity(10800)),
			wantCounts: "Service/InvalidAffinity=1",
		},
		{
			name:       "ClientIP with huge timeout clamped",
			in:         testService(affinity(corev1.ServiceAffinityClientIP, ptr[int32](1<<30))),
			want:       wantService(wantAffinity(86400)),
			wantCounts: "Service/InvalidAffinity=1",
		},
		{
			name:       "unknown affinity is none",
			in:         testService(affinity("Cookie", ptr[int32](60))),
			want:       wantService(),
			wantCounts: "Service/InvalidAffinity=1",
		},
	})
}

func etp(policy corev1.ServiceExternalTrafficPolicy) func(*corev1.Service) {
	return func(s *corev1.Service) { s.Spec.ExternalTrafficPolicy = policy }
}

func TestServiceTrafficPolicies(t *testing.T) {
	local, lb, nodePort := corev1.ServiceExternalTrafficPolicyLocal, corev1.ServiceTypeLoadBalancer, corev1.ServiceTypeNodePort
	hc := func(port int32) func(*corev1.Service) {
		return func(s *corev1.Service) { s.Spec.HealthCheckNodePort = port }
	}
	typ := func(typ model.ServiceType) func(*model.Service) {
		return func(s *model.Service) { s.Type = typ }
	}
	localETP := func(s *model.Service) { s.ExternalPolicy = model.PolicyLocal }
	runServiceCases(t, []serviceCase{
		{
			name:       "ETP Local on ClusterIP-only service is Cluster",
			in:         testService(etp(local)),
			want:       wantService(),
			wantCounts: "Service/FieldNotApplicable=1",
		},
		{
			name: "ETP Local on ClusterIP service with external IPs",
			in:   testService(etp(local), func(s *corev1.Service) { s.Spec.ExternalIPs = []string{"192.0.2.1"} }),
			want: wantService(localETP, func(s *model.Service) { s.ExternalIPs = addrs("192.0.2.1") }),
		},
		{
			name:       "ETP Local with only invalid external IPs is Cluster",
			in:         testService(etp(local), func(s *corev1.Service) { s.Spec.ExternalIPs = []string{"bad"} }),
			want:       wantService(),
			wantCounts: "Service/FieldNotApplicable=1 Service/InvalidIP=1",
		},
		{
			name:       "ETP Local on NodePort, health-check port not applicable",
			in:         testService(asType(nodePort), etp(local), hc(32000)),
			want:       wantService(typ(model.TypeNodePort), localETP),
			wantCounts: "Service/FieldNotApplicable=1",
		},
		{
			name: "LoadBalancer ETP Local keeps health-check port",
			in:   testService(asType(lb), etp(local), hc(32000)),
			want: wantService(typ(model.TypeLoadBalancer), localETP, func(s *model.Service) { s.HealthCheckNodePort = 32000 }),
		},
		{
			name:       "LoadBalancer ETP Local without health-check port",
			in:         testService(asType(lb), etp(local)),
			want:       wantService(typ(model.TypeLoadBalancer), localETP),
			wantCounts: "Service/InvalidHealthCheckNodePort=1",
		},
		{
			name:       "LoadBalancer ETP Local with out-of-range health-check port",
			in:         testService(asType(lb), etp(local), hc(70000)),
			want:       wantService(typ(model.TypeLoadBalancer), localETP),
			wantCounts: "Service/InvalidHealthCheckNodePort=1",
		},
		{
			name:       "LoadBalancer ETP Cluster drops health-check port",
			in:         testService(asType(lb), etp(corev1.ServiceExternalTrafficPolicyCluster), hc(32000)),
			want:       wantService(typ(model.TypeLoadBalancer)),
			wantCounts: "Service/FieldNotApplicable=1",
		},
		{
			name:       "unknown ETP is Cluster",
			in:         testService(asType(nodePort), etp("Global")),
			want:       wantService(typ(model.TypeNodePort)),
			wantCounts: "Service/InvalidTrafficPolicy=1",
		},
	})
}

func TestServiceInternalTrafficPolicy(t *testing.T) {
	runServiceCases(t, []serviceCase{
		{
			name: "ITP Local",
			in: testService(func(s *corev1.Service) {
				s.Spec.InternalTrafficPolicy = ptr(corev1.ServiceInternalTrafficPolicyLocal)
			}),
			want: wantService(func(s *model.Service) { s.InternalPolicy = model.PolicyLocal }),
		},
		{
			name: "ITP Cluster",
			in: testService(func(s *corev1.Service) {
				s.Spec.InternalTrafficPolicy = ptr(corev1.ServiceInternalTrafficPolicyCluster)
			}),
			want: wantService(),
		},
		{
			name: "unknown ITP is Cluster",
			in: testService(func(s *corev1.Service) {
				s.Spec.InternalTrafficPolicy = ptr(corev1.ServiceInternalTrafficPolicy("Node"))
			}),
			want:       wantService(),
			wantCounts: "Service/InvalidTrafficPolicy=1",
		},
	})
}

func TestServiceTrafficDistribution(t *testing.T) {
	td := func(v string) func(*corev1.Service) {
		return func(s *corev1.Service) { s.Spec.TrafficDistribution = &v }
	}
	wantTD := func(v string) func(*model.Service) {
		return func(s *model.Service) { s.TrafficDistribution = v }
	}
	runServiceCases(t, []serviceCase{
		{name: "PreferClose", in: testService(td("PreferClose")), want: wantService(wantTD("PreferClose"))},
		{name: "PreferSameZone", in: testService(td("PreferSameZone")), want: wantService(wantTD("PreferSameZone"))},
		{name: "PreferSameNode", in: testService(td("PreferSameNode")), want: wantService(wantTD("PreferSameNode"))},
		{name: "empty", in: testService(td("")), want: wantService()},
		{
			name:       "unknown",
			in:         testService(td("PreferMars")),
			want:       wantService(),
			wantCounts: "Service/UnknownTrafficDistribution=1",
		},
	})
}

func TestServiceLoadBalancing(t *testing.T) {
	annotate := func(v string) func(*corev1.Service) {
		return func(s *corev1.Service) {
			s.Annotations = map[string]string{serviceport.AnnotationLoadBalancing: v}
		}
	}
	wantLB := func(v string) func(*model.Service) {
		return func(s *model.Service) { s.LoadBalancing = v }
	}
	runServiceCases(t, []serviceCase{
		{name: "none", in: testService(), want: wantService()},
		{name: "random", in: testService(annotate("random")), want: wantService(wantLB("random"))},
		{name: "round-robin", in: testService(annotate("round-robin")), want: wantService(wantLB("round-robin"))},
		{name: "maglev", in: testService(annotate("maglev")), want: wantService(wantLB("maglev"))},
		{name: "source-hash", in: testService(annotate("source-hash")), want: wantService(wantLB("source-hash"))},
		{
			name:       "unknown is the cluster default",
			in:         testService(annotate("Maglev")),
			want:       wantService(),
			wantCounts: "Service/UnknownLoadBalancing=1",
		},
	})
}
