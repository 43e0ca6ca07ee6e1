package translate

import (
	"fmt"
	"net/netip"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/switchyard-proxy/switchyard/controlplane/internal/model"
)

// testSlice returns a minimal valid IPv4 slice of service default/web with
// one port and one endpoint, changed by mods.
func testSlice(mods ...func(*discoveryv1.EndpointSlice)) *discoveryv1.EndpointSlice {
	return modified(&discoveryv1.EndpointSlice{
		ObjectMeta: metav1.ObjectMeta{
			Namespace: "default",
			Name:      "web-abc12",
			Labels:    map[string]string{discoveryv1.LabelServiceName: "web"},
		},
		AddressType: discoveryv1.AddressTypeIPv4,
		Ports: []discoveryv1.EndpointPort{{
			Name: ptr("http"), Protocol: ptr(corev1.ProtocolTCP), Port: ptr[int32](8080),
		}},
		Endpoints: []discoveryv1.Endpoint{{Addresses: []string{"10.1.0.1"}}},
	}, mods)
}

// wantSlice returns the translation of testSlice() changed by mods.
func wantSlice(mods ...func(*model.EndpointSlice)) *model.EndpointSlice {
	return modified(&model.EndpointSlice{
		Key:       model.SliceKey{Namespace: "default", Name: "web-abc12"},
		Service:   model.ServiceKey{Namespace: "default", Name: "web"},
		Family:    model.IPv4,
		Ports:     []model.EndpointPort{{Name: "http", Protocol: model.ProtocolTCP, Port: 8080}},
		Endpoints: []model.Endpoint{readyEndpoint("10.1.0.1")},
	}, mods)
}

func readyEndpoint(ip string) model.Endpoint {
	return model.Endpoint{Address: netip.MustParseAddr(ip), Ready: true, Serving: true}
}

func withEndpoints(eps ...discoveryv1.Endpoint) func(*discoveryv1.EndpointSlice) {
	return func(s *discoveryv1.EndpointSlice) { s.Endpoints = eps }
}

func wantEndpoints(eps ...model.Endpoint) func(*model.EndpointSlice) {
	return func(s *model.EndpointSlice) { s.Endpoints = eps }
}

func ipv6Slice(s *discoveryv1.EndpointSlice) { s.AddressType = discoveryv1.AddressTypeIPv6 }

func ep(addresses ...string) discoveryv1.Endpoint { return discoveryv1.Endpoint{Addresses: addresses} }

func conditions(ready, serving, terminating *bool) discoveryv1.EndpointConditions {
	return discoveryv1.EndpointConditions{Ready: ready, Serving: serving, Terminating: terminating}
}

type sliceCase = translateCase[*discoveryv1.EndpointSlice, model.EndpointSlice]

func runSliceCases(t *testing.T, cases []sliceCase) {
	t.Helper()
	runTranslateCases(t, EndpointSlice, checkSlice, cases)
}

func TestEndpointSliceSkips(t *testing.T) {
	label := func(k, v string) func(*discoveryv1.EndpointSlice) {
		return func(s *discoveryv1.EndpointSlice) { s.Labels[k] = v }
	}
	runSliceCases(t, []sliceCase{
		{name: "minimal", in: testSlice(), want: wantSlice()},
		{name: "nil", wantSkip: ReasonNilObject, wantCounts: "EndpointSlice/NilObject=1"},
		{
			name:       "missing service-name label",
			in:         testSlice(func(s *discoveryv1.EndpointSlice) { s.Labels = nil }),
			wantSkip:   ReasonMissingServiceName,
			wantCounts: "EndpointSlice/MissingServiceName=1",
		},
		{
			name:       "empty service-name label",
			in:         testSlice(label(discoveryv1.LabelServiceName, "")),
			wantSkip:   ReasonMissingServiceName,
			wantCounts: "EndpointSlice/MissingServiceName=1",
		},
		{
			name:       "odd service-name label",
			in:         testSlice(label(discoveryv1.LabelServiceName, "web/../x")),
			wantSkip:   ReasonInvalidName,
			wantCounts: "EndpointSlice/InvalidName=1",
		},
		{
			name:       "headless service's slice",
			in:         testSlice(label(corev1.IsHeadlessService, "")),
			wantSkip:   ReasonHeadless,
			wantCounts: "EndpointSlice/Headless=1",
		},
		{
			name: "FQDN",
			in: testSlice(func(s *discoveryv1.EndpointSlice) {
				s.AddressType = discoveryv1.AddressTypeFQDN
				s.Endpoints = []discoveryv1.Endpoint{ep("db.example.com")}
			}),
			wantSkip:   ReasonFQDNAddressType,
			wantCounts: "EndpointSlice/FQDNAddressType=1",
		},
		{
			name:       "unknown address type",
			in:         testSlice(func(s *discoveryv1.EndpointSlice) { s.AddressType = "IPv5" }),
			wantSkip:   ReasonUnknownAddressType,
			wantCounts: "EndpointSlice/UnknownAddressType=1",
		},
		{
			name:       "empty address type",
			in:         testSlice(func(s *discoveryv1.EndpointSlice) { s.AddressType = "" }),
			wantSkip:   ReasonUnknownAddressType,
			wantCounts: "EndpointSlice/UnknownAddressType=1",
		},
		{
			name:       "odd slice name",
			in:         testSlice(func(s *discoveryv1.EndpointSlice) { s.Name = "Web_ABC" }),
			wantSkip:   ReasonInvalidName,
			wantCounts: "EndpointSlice/InvalidName=1",
		},
		{
			name:       "empty namespace",
			in:         testSlice(func(s *discoveryv1.EndpointSlice) { s.Namespace = "" }),
			wantSkip:   ReasonInvalidName,
			wantCounts: "EndpointSlice/InvalidName=1",
		},
		{
			name: "no ports and no endpoints is kept",
			in: testSlice(func(s *discoveryv1.EndpointSlice) {
				s.Ports, s.Endpoints = nil, nil
			}),
			want: wantSlice(func(s *model.EndpointSlice) { s.Ports, s.Endpoints = nil, nil }),
		},
	})
}

func TestEndpointSliceEndpoints(t *testing.T) {
	yes, no := ptr(true), ptr(false)
	runSliceCases(t, []sliceCase{
		{
			name: "conditions resolved",
			in: testSlice(withEndpoints(
				discoveryv1.Endpoint{Addresses: []string{"10.1.0.1"}, Conditions: conditions(nil, nil, nil)},
				discoveryv1.Endpoint{Addresses: []string{"10.1.0.2"}, Conditions: conditions(no, nil, nil)},
				discoveryv1.Endpoint{Addresses: []string{"10.1.0.3"}, Conditions: conditions(no, yes, yes)},
				discoveryv1.Endpoint{Addresses: []string{"10.1.0.4"}, Conditions: conditions(no, no, yes)},
				discoveryv1.Endpoint{Addresses: []string{"10.1.0.5"}, Conditions: conditions(yes, no, nil)},
			)),
			want: wantSlice(wantEndpoints(
				readyEndpoint("10.1.0.1"),
				model.Endpoint{Address: netip.MustParseAddr("10.1.0.2")},
				model.Endpoint{Address: netip.MustParseAddr("10.1.0.3"), Serving: true, Terminating: true},
				model.Endpoint{Address: netip.MustParseAddr("10.1.0.4"), Terminating: true},
				model.Endpoint{Address: netip.MustParseAddr("10.1.0.5"), Ready: true},
			)),
		},
		{
			name:       "first address only; bad first address drops the endpoint",
			in:         testSlice(withEndpoints(ep("10.1.0.1", "10.1.0.9"), ep("bogus", "10.1.0.2"), ep())),
			want:       wantSlice(),
			wantCounts: "EndpointSlice/InvalidIP=1 EndpointSlice/NoAddress=1",
		},
		{
			name:       "wrong family in IPv4 slice",
			in:         testSlice(withEndpoints(ep("10.1.0.1"), ep("2001:db8::1"))),
			want:       wantSlice(),
			wantCounts: "EndpointSlice/WrongFamily=1",
		},
		{
			name: "IPv6 slice: normalised, IPv4-mapped is the wrong family",
			in:   testSlice(ipv6Slice, withEndpoints(ep("2001:DB8::0001"), ep("::ffff:10.1.0.1"), ep("10.1.0.2"))),
			want: wantSlice(func(s *model.EndpointSlice) { s.Family = model.IPv6 },
				wantEndpoints(readyEndpoint("2001:db8::1"))),
			wantCounts: "EndpointSlice/WrongFamily=2",
		},
		{
			name: "IPv4-mapped address in IPv4 slice is IPv4, leading zeros decimal",
			in:   testSlice(withEndpoints(ep("::ffff:10.1.0.1"), ep("010.001.000.002"))),
			want: wantSlice(wantEndpoints(readyEndpoint("10.1.0.1"), readyEndpoint("10.1.0.2"))),
		},
		{
			name:       "zoned and unspecified addresses dropped",
			in:         testSlice(ipv6Slice, withEndpoints(ep("fe80::1%eth0"), ep("::"))),
			want:       wantSlice(func(s *model.EndpointSlice) { s.Family, s.Endpoints = model.IPv6, nil }),
			wantCounts: "EndpointSlice/InvalidIP=2",
		},
	})
}

func TestEndpointSliceDuplicatesAndHints(t *testing.T) {
	yes, no := ptr(true), ptr(false)
	runSliceCases(t, []sliceCase{
		{
			name: "duplicate address: a later running endpoint replaces, a later terminating one does not",
			in: testSlice(withEndpoints(
				discoveryv1.Endpoint{Addresses: []string{"10.1.0.1"}, Conditions: conditions(no, yes, yes), NodeName: ptr("old")},
				discoveryv1.Endpoint{Addresses: []string{"10.1.0.2"}},
				discoveryv1.Endpoint{Addresses: []string{"10.1.0.1"}, NodeName: ptr("new")},
				discoveryv1.Endpoint{Addresses: []string{"10.1.0.1"}, Conditions: conditions(no, no, yes), NodeName: ptr("gone")},
			)),
			want: wantSlice(wantEndpoints(
				model.Endpoint{Address: netip.MustParseAddr("10.1.0.1"), Ready: true, Serving: true, NodeName: "new"},
				readyEndpoint("10.1.0.2"),
			)),
			wantCounts: "EndpointSlice/DuplicateEndpoint=2",
		},
		{
			name: "node, zone and hints copied; hints deduplicated, nil when empty",
			in: testSlice(withEndpoints(
				discoveryv1.Endpoint{
					Addresses: []string{"10.1.0.1"}, NodeName: ptr("node-a"), Zone: ptr("zone-1"),
					Hints: &discoveryv1.EndpointHints{
						ForZones: []discoveryv1.ForZone{{Name: "zone-1"}, {Name: "zone-2"}, {Name: "zone-1"}, {Name: ""}},
						ForNodes: []discoveryv1.ForNode{{Name: "node-a"}},
					},
				},
				discoveryv1.Endpoint{Addresses: []string{"10.1.0.2"}, Hints: &discoveryv1.EndpointHints{}},
				discoveryv1.Endpoint{
					Addresses: []string{"10.1.0.3"},
					Hints:     &discoveryv1.EndpointHints{ForZones: []discoveryv1.ForZone{{Name: ""}}},
				},
			)),
			want: wantSlice(wantEndpoints(
				model.Endpoint{
					Address: netip.MustParseAddr("10.1.0.1"), Ready: true, Serving: true,
					NodeName: "node-a", Zone: "zone-1",
					HintZones: []string{"zone-1", "zone-2"}, HintNodes: []string{"node-a"},
				},
				readyEndpoint("10.1.0.2"),
				readyEndpoint("10.1.0.3"),
			)),
		},
	})
}

func TestEndpointSliceHuge(t *testing.T) {
	const n = 10000
	in := make([]discoveryv1.Endpoint, n)
	want := make([]model.Endpoint, model.MaxEndpointsPerSlice)
	next := netip.MustParseAddr("10.0.0.1")
	for i := range in {
		ip := next.String()
		next = next.Next()
		in[i] = ep(ip)
		if i < model.MaxEndpointsPerSlice {
			want[i] = readyEndpoint(ip)
		}
	}
	manyPorts := make([]discoveryv1.EndpointPort, model.MaxPortsPerSlice+1)
	wantPorts := make([]model.EndpointPort, model.MaxPortsPerSlice)
	for i := range manyPorts {
		manyPorts[i] = discoveryv1.EndpointPort{Name: ptr(fmt.Sprintf("p%d", i)), Port: ptr(int32(i + 1))}
		if i < model.MaxPortsPerSlice {
			wantPorts[i] = model.EndpointPort{Name: fmt.Sprintf("p%d", i), Protocol: model.ProtocolTCP, Port: uint16(i + 1)}
		}
	}
	runSliceCases(t, []sliceCase{
		{
			name:       "10,000 endpoints clamped",
			in:         testSlice(withEndpoints(in...)),
			want:       wantSlice(wantEndpoints(want...)),
			wantCounts: "EndpointSlice/TooManyEndpoints=1",
		},
		{
			name:       "too many ports clamped",
			in:         testSlice(func(s *discoveryv1.EndpointSlice) { s.Ports = manyPorts }),
			want:       wantSlice(func(s *model.EndpointSlice) { s.Ports = wantPorts }),
			wantCounts: "EndpointSlice/TooManyPorts=1",
		},
	})
}

func TestEndpointSlicePorts(t *testing.T) {
	tcp, udp := model.ProtocolTCP, model.ProtocolUDP
	port := func(name *string, proto *corev1.Protocol, p *int32) discoveryv1.EndpointPort {
		return discoveryv1.EndpointPort{Name: name, Protocol: proto, Port: p}
	}
	runSliceCases(t, []sliceCase{
		{
			name: "nil name is empty, nil protocol is TCP",
			in: testSlice(func(s *discoveryv1.EndpointSlice) {
				s.Ports = []discoveryv1.EndpointPort{port(nil, nil, ptr[int32](80))}
			}),
			want: wantSlice(func(s *model.EndpointSlice) { s.Ports = []model.EndpointPort{{Protocol: tcp, Port: 80}} }),
		},
		{
			name: "nil, zero and out-of-range ports, unknown protocol, odd name dropped",
			in: testSlice(func(s *discoveryv1.EndpointSlice) {
				s.Ports = []discoveryv1.EndpointPort{
					port(ptr("a"), nil, nil),
					port(ptr("b"), nil, ptr[int32](0)),
					port(ptr("c"), nil, ptr[int32](65536)),
					port(ptr("d"), ptr(corev1.Protocol("ICMP")), ptr[int32](1)),
					port(ptr("E E"), nil, ptr[int32](1)),
					port(ptr("f"), ptr(corev1.ProtocolUDP), ptr[int32](53)),
				}
			}),
			want:       wantSlice(func(s *model.EndpointSlice) { s.Ports = []model.EndpointPort{{Name: "f", Protocol: udp, Port: 53}} }),
			wantCounts: "EndpointSlice/InvalidPort=3 EndpointSlice/InvalidPortName=1 EndpointSlice/UnsupportedProtocol=1",
		},
		{
			name: "duplicate name and protocol keeps the first; other protocol kept",
			in: testSlice(func(s *discoveryv1.EndpointSlice) {
				s.Ports = []discoveryv1.EndpointPort{
					port(ptr("dns"), ptr(corev1.ProtocolUDP), ptr[int32](53)),
					port(ptr("dns"), ptr(corev1.ProtocolUDP), ptr[int32](5353)),
					port(ptr("dns"), ptr(corev1.ProtocolTCP), ptr[int32](53)),
				}
			}),
			want: wantSlice(func(s *model.EndpointSlice) {
				s.Ports = []model.EndpointPort{{Name: "dns", Protocol: udp, Port: 53}, {Name: "dns", Protocol: tcp, Port: 53}}
			}),
			wantCounts: "EndpointSlice/DuplicatePort=1",
		},
	})
}

func TestEndpointSliceTriggerTime(t *testing.T) {
	trigger := func(v string) func(*discoveryv1.EndpointSlice) {
		return func(s *discoveryv1.EndpointSlice) {
			s.Annotations = map[string]string{corev1.EndpointsLastChangeTriggerTime: v}
		}
	}
	at := func(tm time.Time) func(*model.EndpointSlice) {
		return func(s *model.EndpointSlice) { s.TriggerTime = tm }
	}
	runSliceCases(t, []sliceCase{
		{
			name: "RFC3339",
			in:   testSlice(trigger("2026-03-01T12:00:00Z")),
			want: wantSlice(at(time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC))),
		},
		{
			name: "RFC3339Nano",
			in:   testSlice(trigger("2026-03-01T12:00:00.123456789Z")),
			want: wantSlice(at(time.Date(2026, 3, 1, 12, 0, 0, 123456789, time.UTC))),
		},
		{
			name: "offset normalised to UTC",
			in:   testSlice(trigger("2026-03-01T14:00:00+02:00")),
			want: wantSlice(at(time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC))),
		},
		{
			name:       "bad value is zero, not a skip",
			in:         testSlice(trigger("yesterday")),
			want:       wantSlice(),
			wantCounts: "EndpointSlice/InvalidTriggerTime=1",
		},
		{
			name:       "empty value is zero",
			in:         testSlice(trigger("")),
			want:       wantSlice(),
			wantCounts: "EndpointSlice/InvalidTriggerTime=1",
		},
	})
}

func TestEndpointSliceNilRecorder(t *testing.T) {
	got, err := EndpointSlice(testSlice(withEndpoints(ep("bad"), ep("10.1.0.1"))), nil)
	if err != nil {
		t.Fatalf("EndpointSlice: %v", err)
	}
	if diff := cmpDiff(wantSlice(), got); diff != "" {
		t.Errorf("mismatch (-want +got):\n%s", diff)
	}
}
