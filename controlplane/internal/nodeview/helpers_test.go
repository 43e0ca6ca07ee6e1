package nodeview

import (
	"net/netip"
	"strings"
	"testing"

	"github.com/switchyard-proxy/switchyard/controlplane/internal/cache"
	"github.com/switchyard-proxy/switchyard/controlplane/internal/model"
	switchyardv1 "github.com/switchyard-proxy/switchyard/proto/switchyard/v1"
)

// Builders for model values. Tests use one namespace, "ns".

type svcOpt func(*model.Service)

func newSvc(name string, opts ...svcOpt) *model.Service {
	return withOpts(&model.Service{
		Key:            model.ServiceKey{Namespace: "ns", Name: name},
		Type:           model.TypeClusterIP,
		ClusterIPs:     []netip.Addr{netip.MustParseAddr("10.96.0.10")},
		Ports:          []model.ServicePort{{Name: "http", Protocol: model.ProtocolTCP, Port: 80}},
		ExternalPolicy: model.PolicyCluster,
		InternalPolicy: model.PolicyCluster,
	}, opts)
}

// withOpts returns v changed by each of opts in turn, as every builder
// here takes the ways its value differs from the usual one.
func withOpts[T any, O ~func(*T)](v *T, opts []O) *T {
	for _, o := range opts {
		o(v)
	}
	return v
}

func withPorts(ports ...model.ServicePort) svcOpt {
	return func(s *model.Service) { s.Ports = ports }
}

func withClusterIPs(ips ...string) svcOpt {
	return func(s *model.Service) {
		s.ClusterIPs = nil
		for _, ip := range ips {
			s.ClusterIPs = append(s.ClusterIPs, netip.MustParseAddr(ip))
		}
	}
}

func withITPLocal() svcOpt {
	return func(s *model.Service) { s.InternalPolicy = model.PolicyLocal }
}

// withETPLocal makes the service a LoadBalancer with externalTrafficPolicy
// Local and the given health-check node port.
func withETPLocal(hc uint16) svcOpt {
	return func(s *model.Service) {
		s.Type = model.TypeLoadBalancer
		s.ExternalPolicy = model.PolicyLocal
		s.HealthCheckNodePort = hc
		for i := range s.Ports {
			s.Ports[i].NodePort = 30000 + s.Ports[i].Port
		}
	}
}

// withNodePort makes the service a NodePort with node port 30000+port on
// each port.
func withNodePort() svcOpt {
	return func(s *model.Service) {
		s.Type = model.TypeNodePort
		for i := range s.Ports {
			s.Ports[i].NodePort = 30000 + s.Ports[i].Port
		}
	}
}

// withETPLocalPolicy sets externalTrafficPolicy Local and nothing else.
func withETPLocalPolicy() svcOpt {
	return func(s *model.Service) { s.ExternalPolicy = model.PolicyLocal }
}

func withExternalIPs(ips ...string) svcOpt {
	return func(s *model.Service) {
		for _, ip := range ips {
			s.ExternalIPs = append(s.ExternalIPs, netip.MustParseAddr(ip))
		}
	}
}

func withType(t model.ServiceType) svcOpt {
	return func(s *model.Service) { s.Type = t }
}

func withDistribution(d string) svcOpt {
	return func(s *model.Service) { s.TrafficDistribution = d }
}

func tcp(name string, port uint16) model.ServicePort {
	return model.ServicePort{Name: name, Protocol: model.ProtocolTCP, Port: port}
}

func slicePort(name string, port uint16) model.EndpointPort {
	return model.EndpointPort{Name: name, Protocol: model.ProtocolTCP, Port: port}
}

// newSlice makes a slice of service ns/svc; its family follows the first
// endpoint's address (IPv4 when empty).
func newSlice(svc, name string, ports []model.EndpointPort, eps ...model.Endpoint) *model.EndpointSlice {
	fam := model.IPv4
	if len(eps) > 0 && eps[0].Address.Is6() {
		fam = model.IPv6
	}
	return &model.EndpointSlice{
		Key:       model.SliceKey{Namespace: "ns", Name: name},
		Service:   model.ServiceKey{Namespace: "ns", Name: svc},
		Family:    fam,
		Ports:     ports,
		Endpoints: eps,
	}
}

type epOpt func(*model.Endpoint)

// newEP makes a ready, serving endpoint on node in zone.
func newEP(addr, node, zone string, opts ...epOpt) model.Endpoint {
	return *withOpts(&model.Endpoint{
		Address:  netip.MustParseAddr(addr),
		Ready:    true,
		Serving:  true,
		NodeName: node,
		Zone:     zone,
	}, opts)
}

// notReady: not ready, not serving, not terminating (e.g. starting).
func notReady(e *model.Endpoint) { e.Ready, e.Serving = false, false }

// servingTerminating: terminating but still serving.
func servingTerminating(e *model.Endpoint) { e.Ready, e.Serving, e.Terminating = false, true, true }

// deadTerminating: terminating and no longer serving.
func deadTerminating(e *model.Endpoint) { e.Ready, e.Serving, e.Terminating = false, false, true }

func zones(z ...string) epOpt    { return func(e *model.Endpoint) { e.HintZones = z } }
func forNodes(n ...string) epOpt { return func(e *model.Endpoint) { e.HintNodes = n } }

func slicesOf(ss ...*model.EndpointSlice) map[model.SliceKey]*model.EndpointSlice {
	m := make(map[model.SliceKey]*model.EndpointSlice, len(ss))
	for _, s := range ss {
		m[s.Key] = s
	}
	return m
}

// nodesOf parses "name@zone" (zone optional).
func nodesOf(specs ...string) map[string]*model.Node {
	m := map[string]*model.Node{}
	for _, s := range specs {
		name, zone, _ := strings.Cut(s, "@")
		m[name] = &model.Node{Name: name, Zone: zone}
	}
	return m
}

// webState is a state of service web with one endpoint, 10.0.0.1 on n1
// in zone a, and the nodes nodesOf(nodes...).
func webState(nodes ...string) *model.State {
	st := model.NewState()
	svc := newSvc("web")
	st.Services[svc.Key] = svc
	st.Slices[svc.Key] = slicesOf(newSlice("web", "web-a", httpPort, newEP("10.0.0.1", "n1", "a")))
	st.Nodes = nodesOf(nodes...)
	return st
}

// Builders for expected protos.

type wantOpt func(*switchyardv1.Endpoint)

// wantEP is a ready, serving endpoint; give its ports with pt.
func wantEP(addr, node, zone string, opts ...wantOpt) *switchyardv1.Endpoint {
	return withOpts(&switchyardv1.Endpoint{Address: addr, Ready: true, Serving: true, NodeName: node, Zone: zone}, opts)
}

// pt adds a port (service port name, target port) to a wanted endpoint.
func pt(name string, port uint32) wantOpt {
	return func(e *switchyardv1.Endpoint) {
		e.Ports = append(e.Ports, &switchyardv1.EndpointPort{Name: name, Port: port})
	}
}

func isLocal(e *switchyardv1.Endpoint) { e.IsLocal = true }
func wantTerminating(e *switchyardv1.Endpoint) {
	e.Ready, e.Serving, e.Terminating = false, true, true
}

func eps(e ...*switchyardv1.Endpoint) []*switchyardv1.Endpoint { return e }

// mustView fails the test when v is nil or not a service view, and
// returns the ServiceView it encodes.
func mustView(t *testing.T, v *View) *switchyardv1.ServiceView {
	t.Helper()
	sv := serviceOf(t, v)
	if sv == nil {
		t.Fatalf("no service view")
	}
	return sv
}

// decode parses what a view encodes: views keep their bytes only.
func decode(t testing.TB, v *View) *switchyardv1.Resource {
	t.Helper()
	if v == nil {
		return nil
	}
	r, err := cache.Decode(&v.View)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// serviceOf is the ServiceView v encodes; nil for none.
func serviceOf(t testing.TB, v *View) *switchyardv1.ServiceView {
	t.Helper()
	return decode(t, v).GetService()
}

// configOf is the NodeConfig v encodes; nil for none.
func configOf(t testing.TB, v *View) *switchyardv1.NodeConfig {
	t.Helper()
	return decode(t, v).GetNodeConfig()
}
