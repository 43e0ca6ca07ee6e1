package translate

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/switchyard-proxy/switchyard/controlplane/internal/model"
)

// testService returns a minimal valid ClusterIP service changed by mods.
func testService(mods ...func(*corev1.Service)) *corev1.Service {
	return modified(&corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "web"},
		Spec: corev1.ServiceSpec{
			Type:       corev1.ServiceTypeClusterIP,
			ClusterIP:  "10.0.0.10",
			ClusterIPs: []string{"10.0.0.10"},
			Ports:      []corev1.ServicePort{{Name: "http", Protocol: corev1.ProtocolTCP, Port: 80}},
		},
	}, mods)
}

// wantService returns the translation of testService() changed by mods.
func wantService(mods ...func(*model.Service)) *model.Service {
	return modified(&model.Service{
		Key:            model.ServiceKey{Namespace: "default", Name: "web"},
		Type:           model.TypeClusterIP,
		ClusterIPs:     addrs("10.0.0.10"),
		Ports:          []model.ServicePort{{Name: "http", Protocol: model.ProtocolTCP, Port: 80}},
		ExternalPolicy: model.PolicyCluster,
		InternalPolicy: model.PolicyCluster,
	}, mods)
}

func clusterIPsAre(ips ...string) func(*corev1.Service) {
	return func(s *corev1.Service) {
		s.Spec.ClusterIP = ips[0]
		s.Spec.ClusterIPs = ips
	}
}

func asType(typ corev1.ServiceType) func(*corev1.Service) {
	return func(s *corev1.Service) { s.Spec.Type = typ }
}

type serviceCase = translateCase[*corev1.Service, model.Service]

func runServiceCases(t *testing.T, cases []serviceCase) {
	t.Helper()
	runTranslateCases(t, Service, checkService, cases)
}

func TestServiceSkips(t *testing.T) {
	runServiceCases(t, []serviceCase{
		{name: "minimal ClusterIP", in: testService(), want: wantService()},
		{
			name: "empty type is ClusterIP",
			in:   testService(asType("")),
			want: wantService(),
		},
		{name: "nil", wantSkip: ReasonNilObject, wantCounts: "Service/NilObject=1"},
		{
			name:       "headless None",
			in:         testService(clusterIPsAre(corev1.ClusterIPNone)),
			wantSkip:   ReasonHeadless,
			wantCounts: "Service/Headless=1",
		},
		{
			name: "headless empty",
			in: testService(func(s *corev1.Service) {
				s.Spec.ClusterIP, s.Spec.ClusterIPs = "", nil
			}),
			wantSkip:   ReasonHeadless,
			wantCounts: "Service/Headless=1",
		},
		{
			name: "ExternalName",
			in: testService(asType(corev1.ServiceTypeExternalName), func(s *corev1.Service) {
				s.Spec.ClusterIP, s.Spec.ClusterIPs, s.Spec.ExternalName = "", nil, "db.example.com"
			}),
			wantSkip:   ReasonExternalName,
			wantCounts: "Service/ExternalName=1",
		},
		{
			name:       "ExternalName with a cluster IP is still skipped",
			in:         testService(asType(corev1.ServiceTypeExternalName)),
			wantSkip:   ReasonExternalName,
			wantCounts: "Service/ExternalName=1",
		},
		{
			name: "service-proxy-name label, even empty",
			in: testService(func(s *corev1.Service) {
				s.Labels = map[string]string{LabelServiceProxyName: ""}
			}),
			wantSkip:   ReasonOtherProxy,
			wantCounts: "Service/OtherProxy=1",
		},
		{
			name:       "unknown type",
			in:         testService(asType("Magic")),
			wantSkip:   ReasonUnsupportedType,
			wantCounts: "Service/UnsupportedType=1",
		},
	})
}

func TestServiceNames(t *testing.T) {
	runServiceCases(t, []serviceCase{
		{
			name:       "odd namespace",
			in:         testService(func(s *corev1.Service) { s.Namespace = "Bad_NS" }),
			wantSkip:   ReasonInvalidName,
			wantCounts: "Service/InvalidName=1",
		},
		{
			name:       "empty name",
			in:         testService(func(s *corev1.Service) { s.Name = "" }),
			wantSkip:   ReasonInvalidName,
			wantCounts: "Service/InvalidName=1",
		},
		{
			name:       "name too long",
			in:         testService(func(s *corev1.Service) { s.Name = strings.Repeat("a", 64) }),
			wantSkip:   ReasonInvalidName,
			wantCounts: "Service/InvalidName=1",
		},
		{
			name:       "name with a slash",
			in:         testService(func(s *corev1.Service) { s.Name = "a/b" }),
			wantSkip:   ReasonInvalidName,
			wantCounts: "Service/InvalidName=1",
		},
		{
			name:       "only cluster IP invalid",
			in:         testService(clusterIPsAre("10.0.0.300")),
			wantSkip:   ReasonNoClusterIP,
			wantCounts: "Service/InvalidIP=1 Service/NoClusterIP=1",
		},
		{
			name:       "cluster IP with zone",
			in:         testService(clusterIPsAre("fe80::1%eth0")),
			wantSkip:   ReasonNoClusterIP,
			wantCounts: "Service/InvalidIP=1 Service/NoClusterIP=1",
		},
		{
			name:       "unspecified cluster IP",
			in:         testService(clusterIPsAre("0.0.0.0")),
			wantSkip:   ReasonNoClusterIP,
			wantCounts: "Service/InvalidIP=1 Service/NoClusterIP=1",
		},
	})
}

func TestServiceClusterIPs(t *testing.T) {
	runServiceCases(t, []serviceCase{
		{
			name: "dual stack, IPv4 primary, IPv6 normalised",
			in:   testService(clusterIPsAre("10.0.0.10", "2001:db8::0001")),
			want: wantService(func(s *model.Service) { s.ClusterIPs = addrs("10.0.0.10", "2001:db8::1") }),
		},
		{
			name: "dual stack, IPv6 primary",
			in:   testService(clusterIPsAre("2001:DB8:0:0::a", "10.0.0.10")),
			want: wantService(func(s *model.Service) { s.ClusterIPs = addrs("2001:db8::a", "10.0.0.10") }),
		},
		{
			name:       "second IP of the same family dropped",
			in:         testService(clusterIPsAre("10.0.0.10", "10.0.0.11", "2001:db8::1", "2001:db8::2")),
			want:       wantService(func(s *model.Service) { s.ClusterIPs = addrs("10.0.0.10", "2001:db8::1") }),
			wantCounts: "Service/ExtraClusterIP=2",
		},
		{
			name:       "invalid primary, valid secondary kept",
			in:         testService(clusterIPsAre("not-an-ip", "2001:db8::1")),
			want:       wantService(func(s *model.Service) { s.ClusterIPs = addrs("2001:db8::1") }),
			wantCounts: "Service/InvalidIP=1",
		},
		{
			name: "IPv4-mapped IPv6 is IPv4",
			in:   testService(clusterIPsAre("::ffff:10.0.0.10")),
			want: wantService(),
		},
		{
			name: "legacy leading zeros read as decimal",
			in:   testService(clusterIPsAre("010.000.000.010")),
			want: wantService(),
		},
		{
			name: "only spec.clusterIP set (old object)",
			in:   testService(func(s *corev1.Service) { s.Spec.ClusterIPs = nil }),
			want: wantService(),
		},
	})
}

func TestServiceExternalAddresses(t *testing.T) {
	runServiceCases(t, []serviceCase{
		{
			name: "external IPs: valid, normalised, invalid, duplicate, family not served",
			in: testService(func(s *corev1.Service) {
				s.Spec.ExternalIPs = []string{"192.0.2.1", "::ffff:192.0.2.2", "192.0.2.300", "192.0.2.1", "2001:db8::9", ""}
			}),
			want: wantService(func(s *model.Service) {
				s.ExternalIPs = addrs("192.0.2.1", "192.0.2.2")
			}),
			wantCounts: "Service/DuplicateAddress=1 Service/FamilyNotServed=1 Service/InvalidIP=2",
		},
		{
			name: "external IPs of both families on a dual-stack service",
			in: testService(clusterIPsAre("10.0.0.10", "2001:db8::a"), func(s *corev1.Service) {
				s.Spec.ExternalIPs = []string{"2001:db8::9", "192.0.2.1"}
			}),
			want: wantService(func(s *model.Service) {
				s.ClusterIPs = addrs("10.0.0.10", "2001:db8::a")
				s.ExternalIPs = addrs("2001:db8::9", "192.0.2.1")
			}),
		},
		{
			name: "load-balancer ingress: VIP kept, Proxy and unknown modes and hostnames skipped",
			in: testService(asType(corev1.ServiceTypeLoadBalancer), func(s *corev1.Service) {
				s.Status.LoadBalancer.Ingress = []corev1.LoadBalancerIngress{
					{IP: "203.0.113.1"},
					{IP: "203.0.113.2", IPMode: ptr(corev1.LoadBalancerIPModeVIP)},
					{IP: "203.0.113.3", IPMode: ptr(corev1.LoadBalancerIPModeProxy)},
					{IP: "203.0.113.4", IPMode: ptr(corev1.LoadBalancerIPMode("Other"))},
					{Hostname: "lb.example.com"},
					{IP: "203.0.113.x"},
					{IP: "2001:db8::5"},
					{IP: "203.0.113.1"},
				}
			}),
			want: wantService(func(s *model.Service) {
				s.Type = model.TypeLoadBalancer
				s.LoadBalancerIPs = addrs("203.0.113.1", "203.0.113.2")
			}),
			wantCounts: "Service/DuplicateAddress=1 Service/FamilyNotServed=1 Service/InvalidIP=1 Service/ProxyModeIngress=2",
		},
		{
			name: "stale load-balancer ingress on a ClusterIP service",
			in: testService(func(s *corev1.Service) {
				s.Status.LoadBalancer.Ingress = []corev1.LoadBalancerIngress{{IP: "203.0.113.1"}}
			}),
			want:       wantService(),
			wantCounts: "Service/FieldNotApplicable=1",
		},
		{
			name: "source ranges: trimmed, masked, invalid, duplicate, family not served, any kept",
			in: testService(asType(corev1.ServiceTypeLoadBalancer), func(s *corev1.Service) {
				s.Spec.LoadBalancerSourceRanges = []string{
					" 192.0.2.0/24 ", "198.51.100.7/16", "10.0.0.0/33", "nonsense",
					"192.0.2.0/24", "2001:db8::/32", "", "0.0.0.0/0", "::ffff:172.16.0.0/108",
				}
			}),
			want: wantService(func(s *model.Service) {
				s.Type = model.TypeLoadBalancer
				s.LoadBalancerSourceRanges = prefixes("192.0.2.0/24", "198.51.0.0/16", "0.0.0.0/0", "172.16.0.0/12")
			}),
			wantCounts: "Service/DuplicateAddress=1 Service/FamilyNotServed=1 Service/InvalidSourceRange=2",
		},
		{
			name: "source ranges on a NodePort service",
			in: testService(asType(corev1.ServiceTypeNodePort), func(s *corev1.Service) {
				s.Spec.LoadBalancerSourceRanges = []string{"192.0.2.0/24"}
			}),
			want:       wantService(func(s *model.Service) { s.Type = model.TypeNodePort }),
			wantCounts: "Service/FieldNotApplicable=1",
		},
	})
}

func TestServiceNilRecorder(t *testing.T) {
	in := testService(clusterIPsAre("bad", "10.0.0.10"))
	got, err := Service(in, nil)
	if err != nil {
		t.Fatalf("Service: %v", err)
	}
	if err := checkService(got); err != nil {
		t.Errorf("invariants: %v", err)
	}
	if _, err := Service(nil, nil); !IsSkip(err) {
		t.Errorf("Service(nil, nil) error = %v, want a skip", err)
	}
}
