package slices

import (
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func ptr[T any](v T) *T { return &v }

func service(mod ...func(*corev1.Service)) *corev1.Service {
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "web", UID: "uid-1"},
		Spec:       corev1.ServiceSpec{ClusterIP: "10.96.0.10"},
	}
	for _, m := range mod {
		m(svc)
	}
	return svc
}

func ownerRef() []metav1.OwnerReference {
	return []metav1.OwnerReference{{
		APIVersion: "v1", Kind: "Service", Name: "web", UID: "uid-1",
		Controller: ptr(true), BlockOwnerDeletion: ptr(true),
	}}
}

func baseLabels() map[string]string {
	return map[string]string{
		"kubernetes.io/service-name":             "web",
		"endpointslice.kubernetes.io/managed-by": "switchyard-testbed",
	}
}

func TestBuild(t *testing.T) {
	trigger := time.Date(2026, 11, 30, 10, 11, 12, 123456789, time.FixedZone("CET", 3600))
	const wantStamp = "2026-11-30T09:11:12.123456789Z"

	tests := []struct {
		name    string
		svc     *corev1.Service
		slice   Slice
		trigger time.Time
		want    *discoveryv1.EndpointSlice
	}{{
		name: "ready endpoint, default TCP, IPv4 default, trigger time in UTC nanos",
		svc:  service(),
		slice: Slice{
			Namespace: "ns", Service: "web", Suffix: "a",
			Ports:     []Port{{Name: "http", Port: 8080}},
			Endpoints: []Endpoint{Ready("10.0.0.1").OnNode("n1").InZone("z1")},
		},
		trigger: trigger,
		want: &discoveryv1.EndpointSlice{
			ObjectMeta: metav1.ObjectMeta{
				Name: "web-a", Namespace: "ns", Labels: baseLabels(), OwnerReferences: ownerRef(),
				Annotations: map[string]string{"endpoints.kubernetes.io/last-change-trigger-time": wantStamp},
			},
			AddressType: discoveryv1.AddressTypeIPv4,
			Ports:       []discoveryv1.EndpointPort{{Name: ptr("http"), Port: ptr[int32](8080), Protocol: ptr(corev1.ProtocolTCP)}},
			Endpoints: []discoveryv1.Endpoint{{
				Addresses:  []string{"10.0.0.1"},
				Conditions: discoveryv1.EndpointConditions{Ready: ptr(true), Serving: ptr(true), Terminating: ptr(false)},
				NodeName:   ptr("n1"), Zone: ptr("z1"),
			}},
		},
	}, {
		name: "conditions: not ready, terminating serving and not, unset",
		svc:  service(),
		slice: Slice{
			Namespace: "ns", Service: "web", Suffix: "b", AddressType: discoveryv1.AddressTypeIPv6,
			Endpoints: []Endpoint{
				NotReady("fd00::1"),
				Terminating(true, "fd00::2"),
				Terminating(false, "fd00::3"),
				{Addresses: []string{"fd00::4"}},
			},
		},
		want: &discoveryv1.EndpointSlice{
			ObjectMeta:  metav1.ObjectMeta{Name: "web-b", Namespace: "ns", Labels: baseLabels(), OwnerReferences: ownerRef()},
			AddressType: discoveryv1.AddressTypeIPv6,
			Ports:       []discoveryv1.EndpointPort{},
			Endpoints: []discoveryv1.Endpoint{
				{Addresses: []string{"fd00::1"}, Conditions: discoveryv1.EndpointConditions{Ready: ptr(false), Serving: ptr(false), Terminating: ptr(false)}},
				{Addresses: []string{"fd00::2"}, Conditions: discoveryv1.EndpointConditions{Ready: ptr(false), Serving: ptr(true), Terminating: ptr(true)}},
				{Addresses: []string{"fd00::3"}, Conditions: discoveryv1.EndpointConditions{Ready: ptr(false), Serving: ptr(false), Terminating: ptr(true)}},
				{Addresses: []string{"fd00::4"}},
			},
		},
	}, {
		name: "hints, hostname, UDP and app protocol",
		svc:  service(),
		slice: Slice{
			Namespace: "ns", Service: "web", Suffix: "c",
			Ports: []Port{UDP("dns", 53), {Name: "h2", Port: 443, AppProtocol: "kubernetes.io/h2c"}},
			Endpoints: []Endpoint{
				Ready("10.0.0.1").WithHostname("pod-0").WithZoneHints("z1", "z2").WithNodeHints("n1"),
				Ready("10.0.0.2").WithNodeHints("n2"),
			},
		},
		want: &discoveryv1.EndpointSlice{
			ObjectMeta:  metav1.ObjectMeta{Name: "web-c", Namespace: "ns", Labels: baseLabels(), OwnerReferences: ownerRef()},
			AddressType: discoveryv1.AddressTypeIPv4,
			Ports: []discoveryv1.EndpointPort{
				{Name: ptr("dns"), Port: ptr[int32](53), Protocol: ptr(corev1.ProtocolUDP)},
				{Name: ptr("h2"), Port: ptr[int32](443), Protocol: ptr(corev1.ProtocolTCP), AppProtocol: ptr("kubernetes.io/h2c")},
			},
			Endpoints: []discoveryv1.Endpoint{{
				Addresses:  []string{"10.0.0.1"},
				Conditions: discoveryv1.EndpointConditions{Ready: ptr(true), Serving: ptr(true), Terminating: ptr(false)},
				Hostname:   ptr("pod-0"),
				Hints: &discoveryv1.EndpointHints{
					ForZones: []discoveryv1.ForZone{{Name: "z1"}, {Name: "z2"}},
					ForNodes: []discoveryv1.ForNode{{Name: "n1"}},
				},
			}, {
				Addresses:  []string{"10.0.0.2"},
				Conditions: discoveryv1.EndpointConditions{Ready: ptr(true), Serving: ptr(true), Terminating: ptr(false)},
				Hints:      &discoveryv1.EndpointHints{ForNodes: []discoveryv1.ForNode{{Name: "n2"}}},
			}},
		},
	}, {
		name: "service labels copied except reserved; headless label",
		svc: service(func(s *corev1.Service) {
			s.Spec.ClusterIP = corev1.ClusterIPNone
			s.Labels = map[string]string{
				"app": "web",
				"service.kubernetes.io/service-proxy-name": "other",
				"kubernetes.io/service-name":               "spoofed",
				"endpointslice.kubernetes.io/managed-by":   "spoofed",
			}
		}),
		slice: Slice{Namespace: "ns", Service: "web", Suffix: "d", Endpoints: []Endpoint{Ready("10.0.0.1")}},
		want: &discoveryv1.EndpointSlice{
			ObjectMeta: metav1.ObjectMeta{
				Name: "web-d", Namespace: "ns", OwnerReferences: ownerRef(),
				Labels: map[string]string{
					"app": "web",
					"service.kubernetes.io/service-proxy-name": "other",
					"service.kubernetes.io/headless":           "",
					"kubernetes.io/service-name":               "web",
					"endpointslice.kubernetes.io/managed-by":   "switchyard-testbed",
				},
			},
			AddressType: discoveryv1.AddressTypeIPv4,
			Ports:       []discoveryv1.EndpointPort{},
			Endpoints: []discoveryv1.Endpoint{{
				Addresses:  []string{"10.0.0.1"},
				Conditions: discoveryv1.EndpointConditions{Ready: ptr(true), Serving: ptr(true), Terminating: ptr(false)},
			}},
		},
	}, {
		name:  "FQDN, no endpoints",
		svc:   service(),
		slice: Slice{Namespace: "ns", Service: "web", Suffix: "e", AddressType: discoveryv1.AddressTypeFQDN},
		want: &discoveryv1.EndpointSlice{
			ObjectMeta:  metav1.ObjectMeta{Name: "web-e", Namespace: "ns", Labels: baseLabels(), OwnerReferences: ownerRef()},
			AddressType: discoveryv1.AddressTypeFQDN,
			Ports:       []discoveryv1.EndpointPort{},
			Endpoints:   []discoveryv1.Endpoint{},
		},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Build(tt.svc, tt.slice, tt.trigger)
			if err != nil {
				t.Fatalf("Build: %v", err)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("Build mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

func TestBuildDoesNotAlias(t *testing.T) {
	e := Ready("10.0.0.1").WithZoneHints("z1")
	s := Slice{Namespace: "ns", Service: "web", Suffix: "a", Endpoints: []Endpoint{e}}
	got, err := Build(service(), s, time.Time{})
	if err != nil {
		t.Fatal(err)
	}
	*e.Ready = false
	e.Addresses[0] = "10.9.9.9"
	if diff := cmp.Diff(Ready("10.0.0.1").Addresses, got.Endpoints[0].Addresses); diff != "" {
		t.Errorf("addresses aliased (-want +got):\n%s", diff)
	}
	if !*got.Endpoints[0].Conditions.Ready {
		t.Error("ready condition aliased to the caller's pointer")
	}
}

func TestBuildInvalid(t *testing.T) {
	ok := Slice{Namespace: "ns", Service: "web", Suffix: "a", Endpoints: []Endpoint{Ready("10.0.0.1")}}
	with := func(mod func(*Slice)) Slice { s := ok; mod(&s); return s }
	tests := []struct {
		name  string
		svc   *corev1.Service
		slice Slice
		want  string // substring of the error
	}{
		{"nil service", nil, ok, "no Service"},
		{"service without UID", service(func(s *corev1.Service) { s.UID = "" }), ok, "has no UID"},
		{"other service", service(func(s *corev1.Service) { s.Name = "api" }), ok, "does not match"},
		{"other namespace", service(func(s *corev1.Service) { s.Namespace = "kube-system" }), ok, "does not match"},
		{"empty suffix", service(), with(func(s *Slice) { s.Suffix = "" }), "empty suffix"},
		{"bad name", service(), with(func(s *Slice) { s.Suffix = "Upper_Case" }), "RFC 1123"},
		{"unknown address type", service(), with(func(s *Slice) { s.AddressType = "IPv5" }), "unknown address type"},
		{"no addresses", service(), with(func(s *Slice) { s.Endpoints = []Endpoint{{}} }), "0 addresses"},
		{"IPv6 in IPv4 slice", service(), with(func(s *Slice) { s.Endpoints = []Endpoint{Ready("fd00::1")} }), "does not match address type IPv4"},
		{"IPv4 in IPv6 slice", service(), with(func(s *Slice) { s.AddressType = discoveryv1.AddressTypeIPv6 }), "does not match address type IPv6"},
		{"not an IP", service(), with(func(s *Slice) { s.Endpoints = []Endpoint{Ready("pod.example")} }), "not an IP address"},
		{"not an FQDN", service(), with(func(s *Slice) {
			s.AddressType = discoveryv1.AddressTypeFQDN
			s.Endpoints = []Endpoint{Ready("Not A Name")}
		}), "not an FQDN"},
		{"too many ports", service(), with(func(s *Slice) { s.Ports = make([]Port, maxPorts+1) }), "101 ports"},
		{"too many endpoints", service(), with(func(s *Slice) { s.Endpoints = make([]Endpoint, maxEndpoints+1) }), "1001 endpoints"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Build(tt.svc, tt.slice, time.Time{})
			if !IsInvalid(err) || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("Build = %v, %v; want an ErrInvalid error containing %q", got, err, tt.want)
			}
		})
	}
}
