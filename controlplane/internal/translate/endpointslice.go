package translate

import (
	"net/netip"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"

	"github.com/switchyard-proxy/switchyard/controlplane/internal/model"
	"github.com/switchyard-proxy/switchyard/dataplane/serviceport"
)

// EndpointSlice translates one EndpointSlice. It returns a *SkipError for a
// slice no proxy programs (no service-name label, a headless service's, of
// address type FQDN or unknown, or with invalid names); otherwise bad ports
// and endpoints are dropped and reported to rec, which may be nil.
func EndpointSlice(slice *discoveryv1.EndpointSlice, rec Recorder) (*model.EndpointSlice, error) {
	t, err := objectTally(rec, KindEndpointSlice, slice)
	if err != nil {
		return nil, err
	}
	service, err := sliceService(slice, t)
	if err != nil {
		return nil, err
	}
	var family model.IPFamily
	switch slice.AddressType {
	case discoveryv1.AddressTypeIPv4:
		family = model.IPv4
	case discoveryv1.AddressTypeIPv6:
		family = model.IPv6
	case discoveryv1.AddressTypeFQDN:
		return nil, t.skip(ReasonFQDNAddressType, "address type FQDN is not proxied")
	default:
		return nil, t.skip(ReasonUnknownAddressType, "address type %q", slice.AddressType)
	}
	return &model.EndpointSlice{
		Key:         model.SliceKey{Namespace: slice.Namespace, Name: slice.Name},
		Service:     service,
		Family:      family,
		Ports:       slicePorts(slice.Ports, t),
		Endpoints:   endpoints(slice.Endpoints, family, t),
		TriggerTime: triggerTime(slice.Annotations, t),
	}, nil
}

// sliceService checks the slice's names and labels and returns the key of
// the service it belongs to.
func sliceService(slice *discoveryv1.EndpointSlice, t tally) (model.ServiceKey, error) {
	if err := serviceport.CheckNamespace(slice.Namespace); err != nil {
		return model.ServiceKey{}, t.skip(ReasonInvalidName, "namespace: %v", err)
	}
	if err := t.checkName(slice.Name); err != nil {
		return model.ServiceKey{}, err
	}
	name := slice.Labels[discoveryv1.LabelServiceName]
	if name == "" {
		return model.ServiceKey{}, t.skip(ReasonMissingServiceName, "no %s label", discoveryv1.LabelServiceName)
	}
	if err := serviceport.CheckServiceName(name); err != nil {
		return model.ServiceKey{}, t.skip(ReasonInvalidName, "label %s: %v", discoveryv1.LabelServiceName, err)
	}
	if _, ok := slice.Labels[corev1.IsHeadlessService]; ok {
		return model.ServiceKey{}, t.skip(ReasonHeadless, "label %s", corev1.IsHeadlessService)
	}
	return model.ServiceKey{Namespace: slice.Namespace, Name: name}, nil
}

// slicePorts returns the usable ports: a nil name is "", a nil protocol
// TCP; a nil or out-of-range port, or a second port of the same name and
// protocol, is dropped.
func slicePorts(in []discoveryv1.EndpointPort, t tally) []model.EndpointPort {
	var (
		out  []model.EndpointPort
		seen = map[model.EndpointPort]struct{}{}
	)
	for i := range in {
		if len(out) == model.MaxPortsPerSlice {
			t.drop(ReasonTooManyPorts)
			break
		}
		ep := &in[i]
		var name string
		if ep.Name != nil {
			name = *ep.Name
		}
		proto := model.ProtocolTCP
		if ep.Protocol != nil {
			var ok bool
			if proto, ok = protocol(*ep.Protocol); !ok {
				t.drop(ReasonUnsupportedProtocol)
				continue
			}
		}
		if ep.Port == nil {
			t.drop(ReasonInvalidPort)
			continue
		}
		port, ok := portNumber(*ep.Port)
		if !ok {
			t.drop(ReasonInvalidPort)
			continue
		}
		if serviceport.CheckPortName(name) != nil {
			t.drop(ReasonInvalidPortName)
			continue
		}
		key := model.EndpointPort{Name: name, Protocol: proto}
		if _, dup := seen[key]; dup {
			t.drop(ReasonDuplicatePort)
			continue
		}
		seen[key] = struct{}{}
		out = append(out, model.EndpointPort{Name: name, Protocol: proto, Port: port})
	}
	return out
}

// endpoints returns the usable endpoints, each by its first address, at
// most model.MaxEndpointsPerSlice. Of two endpoints with the same address
// the first keeps its place; a later one replaces it unless the later one
// is terminating (kube-proxy prefers a running pod that reused a
// terminating pod's IP). Every endpoint of a slice has the slice's ports,
// so within one slice an address is one kube-proxy endpoint ("ip:port")
// per port; across slices the same address may carry other target ports,
// and nodeview merges those by address and port.
func endpoints(in []discoveryv1.Endpoint, family model.IPFamily, t tally) []model.Endpoint {
	var (
		out   []model.Endpoint
		index = map[netip.Addr]int{}
	)
	for i := range in {
		ep := &in[i]
		if len(ep.Addresses) == 0 {
			t.drop(ReasonNoAddress)
			continue
		}
		addr, ok := parseAddr(ep.Addresses[0])
		if !ok {
			t.drop(ReasonInvalidIP)
			continue
		}
		if familyOf(addr) != family {
			t.drop(ReasonWrongFamily)
			continue
		}
		if at, dup := index[addr]; dup {
			t.drop(ReasonDuplicateEndpoint)
			if !isTrue(ep.Conditions.Terminating, false) {
				out[at] = endpoint(ep, addr)
			}
			continue
		}
		if len(out) == model.MaxEndpointsPerSlice {
			t.drop(ReasonTooManyEndpoints)
			break
		}
		index[addr] = len(out)
		out = append(out, endpoint(ep, addr))
	}
	return out
}

// endpoint builds one endpoint with its conditions resolved as the API
// documents them: ready defaults to true, serving to ready, terminating
// to false.
func endpoint(ep *discoveryv1.Endpoint, addr netip.Addr) model.Endpoint {
	ready := isTrue(ep.Conditions.Ready, true)
	out := model.Endpoint{
		Address:     addr,
		Ready:       ready,
		Serving:     isTrue(ep.Conditions.Serving, ready),
		Terminating: isTrue(ep.Conditions.Terminating, false),
	}
	if ep.NodeName != nil {
		out.NodeName = *ep.NodeName
	}
	if ep.Zone != nil {
		out.Zone = *ep.Zone
	}
	if ep.Hints != nil {
		for _, z := range ep.Hints.ForZones {
			out.HintZones = appendHint(out.HintZones, z.Name)
		}
		for _, n := range ep.Hints.ForNodes {
			out.HintNodes = appendHint(out.HintNodes, n.Name)
		}
	}
	return out
}

func isTrue(b *bool, unset bool) bool {
	if b == nil {
		return unset
	}
	return *b
}

// appendHint adds a non-empty hint once; hints are few, so a linear search
// is cheaper than a set.
func appendHint(hints []string, name string) []string {
	if name == "" {
		return hints
	}
	for _, h := range hints {
		if h == name {
			return hints
		}
	}
	return append(hints, name)
}

// triggerTime reads the last-change-trigger-time annotation; a value that
// does not parse is reported and read as absent.
func triggerTime(annotations map[string]string, t tally) time.Time {
	raw, ok := annotations[corev1.EndpointsLastChangeTriggerTime]
	if !ok {
		return time.Time{}
	}
	// RFC3339Nano parsing accepts RFC3339 with or without fractional seconds.
	parsed, err := time.Parse(time.RFC3339Nano, raw)
	if err != nil {
		t.drop(ReasonInvalidTriggerTime)
		return time.Time{}
	}
	return parsed.UTC()
}
