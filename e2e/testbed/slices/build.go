package slices

import (
	"errors"
	"fmt"
	"net/netip"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"
)

// ErrInvalid marks a Slice that cannot become a valid EndpointSlice.
var ErrInvalid = errors.New("invalid EndpointSlice")

// IsInvalid reports whether err comes from validating a Slice.
func IsInvalid(err error) bool { return errors.Is(err, ErrInvalid) }

// API limits enforced by kube-apiserver validation.
const (
	maxEndpoints = 1000
	maxPorts     = 100
	maxAddresses = 100
)

// Build returns the EndpointSlice that describes s for svc, stamped with
// triggerTime (left out when zero). svc must carry its UID, as a Service
// read from the API server does. Build does no I/O.
func Build(svc *corev1.Service, s Slice, triggerTime time.Time) (*discoveryv1.EndpointSlice, error) {
	if err := validate(svc, s); err != nil {
		return nil, err
	}
	addressType := s.AddressType
	if addressType == "" {
		addressType = discoveryv1.AddressTypeIPv4
	}
	es := &discoveryv1.EndpointSlice{
		ObjectMeta: metav1.ObjectMeta{
			Name:            s.Name(),
			Namespace:       svc.Namespace,
			Labels:          Labels(svc),
			OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(svc, corev1.SchemeGroupVersion.WithKind("Service"))},
		},
		AddressType: addressType,
		Endpoints:   make([]discoveryv1.Endpoint, 0, len(s.Endpoints)),
		Ports:       make([]discoveryv1.EndpointPort, 0, len(s.Ports)),
	}
	if !triggerTime.IsZero() {
		es.Annotations = map[string]string{
			corev1.EndpointsLastChangeTriggerTime: triggerTime.UTC().Format(time.RFC3339Nano),
		}
	}
	for _, p := range s.Ports {
		es.Ports = append(es.Ports, endpointPort(p))
	}
	for _, e := range s.Endpoints {
		es.Endpoints = append(es.Endpoints, endpoint(e))
	}
	return es, nil
}

// Labels returns the labels the controller puts on a slice of svc: the
// Service's own labels minus the reserved ones, then service-name,
// managed-by and, for a Service without a cluster IP, headless.
func Labels(svc *corev1.Service) map[string]string {
	labels := make(map[string]string, len(svc.Labels)+3)
	for k, v := range svc.Labels {
		if !isReservedLabel(k) {
			labels[k] = v
		}
	}
	if svc.Spec.ClusterIP == "" || svc.Spec.ClusterIP == corev1.ClusterIPNone {
		labels[corev1.IsHeadlessService] = ""
	}
	labels[discoveryv1.LabelServiceName] = svc.Name
	labels[discoveryv1.LabelManagedBy] = ManagedBy
	return labels
}

func isReservedLabel(key string) bool {
	return key == discoveryv1.LabelServiceName ||
		key == discoveryv1.LabelManagedBy ||
		key == corev1.IsHeadlessService
}

func endpointPort(p Port) discoveryv1.EndpointPort {
	proto := p.Protocol
	if proto == "" {
		proto = corev1.ProtocolTCP
	}
	out := discoveryv1.EndpointPort{Name: &p.Name, Port: &p.Port, Protocol: &proto}
	if p.AppProtocol != "" {
		out.AppProtocol = &p.AppProtocol
	}
	return out
}

func endpoint(e Endpoint) discoveryv1.Endpoint {
	out := discoveryv1.Endpoint{
		Addresses: append([]string(nil), e.Addresses...),
		Conditions: discoveryv1.EndpointConditions{
			Ready:       copyPtr(e.Ready),
			Serving:     copyPtr(e.Serving),
			Terminating: copyPtr(e.Terminating),
		},
		Hostname: nonEmpty(e.Hostname),
		NodeName: nonEmpty(e.NodeName),
		Zone:     nonEmpty(e.Zone),
	}
	if e.TargetRef != nil {
		out.TargetRef = e.TargetRef.DeepCopy()
	}
	if len(e.ForZones) > 0 || len(e.ForNodes) > 0 {
		out.Hints = &discoveryv1.EndpointHints{}
		for _, z := range e.ForZones {
			out.Hints.ForZones = append(out.Hints.ForZones, discoveryv1.ForZone{Name: z})
		}
		for _, n := range e.ForNodes {
			out.Hints.ForNodes = append(out.Hints.ForNodes, discoveryv1.ForNode{Name: n})
		}
	}
	return out
}

func copyPtr[T any](p *T) *T {
	if p == nil {
		return nil
	}
	v := *p
	return &v
}

func nonEmpty(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

// validate catches what would otherwise fail on the server or, worse,
// silently produce a slice no proxy reads.
func validate(svc *corev1.Service, s Slice) error {
	var problems []string
	add := func(format string, args ...any) { problems = append(problems, fmt.Sprintf(format, args...)) }
	switch {
	case svc == nil:
		add("no Service")
	case svc.UID == "":
		add("Service %s/%s has no UID (read it from the API server)", svc.Namespace, svc.Name)
	}
	if svc != nil && (svc.Name != s.Service || svc.Namespace != s.Namespace) {
		add("Service %s/%s does not match slice's %s/%s", svc.Namespace, svc.Name, s.Namespace, s.Service)
	}
	if s.Suffix == "" {
		add("empty suffix")
	}
	for _, msg := range validation.IsDNS1123Subdomain(s.Name()) {
		add("name %q: %s", s.Name(), msg)
	}
	switch s.AddressType {
	case "", discoveryv1.AddressTypeIPv4, discoveryv1.AddressTypeIPv6, discoveryv1.AddressTypeFQDN:
	default:
		add("unknown address type %q", s.AddressType)
	}
	if len(s.Ports) > maxPorts {
		add("%d ports, at most %d allowed", len(s.Ports), maxPorts)
	}
	if len(s.Endpoints) > maxEndpoints {
		add("%d endpoints, at most %d allowed", len(s.Endpoints), maxEndpoints)
	}
	for i, e := range s.Endpoints {
		if n := len(e.Addresses); n == 0 || n > maxAddresses {
			add("endpoint %d: %d addresses, want 1 to %d", i, n, maxAddresses)
		}
		for _, a := range e.Addresses {
			if err := checkAddress(s.AddressType, a); err != nil {
				add("endpoint %d: %v", i, err)
			}
		}
	}
	if len(problems) > 0 {
		return fmt.Errorf("%w %s: %s", ErrInvalid, s.Name(), strings.Join(problems, "; "))
	}
	return nil
}

func checkAddress(t discoveryv1.AddressType, addr string) error {
	if t == discoveryv1.AddressTypeFQDN {
		if msgs := validation.IsDNS1123Subdomain(addr); len(msgs) > 0 {
			return fmt.Errorf("address %q is not an FQDN: %s", addr, strings.Join(msgs, ", "))
		}
		return nil
	}
	ip, err := netip.ParseAddr(addr)
	if err != nil || ip.Zone() != "" {
		return fmt.Errorf("address %q is not an IP address", addr)
	}
	if is4 := ip.Is4(); is4 != (t != discoveryv1.AddressTypeIPv6) {
		return fmt.Errorf("address %q does not match address type %s", addr, addressTypeOrDefault(t))
	}
	return nil
}

func addressTypeOrDefault(t discoveryv1.AddressType) discoveryv1.AddressType {
	if t == "" {
		return discoveryv1.AddressTypeIPv4
	}
	return t
}
