package serviceport

import (
	"fmt"
	"net/netip"
	"slices"

	"google.golang.org/protobuf/proto"

	"github.com/switchyard-proxy/switchyard/dataplane"
	"github.com/switchyard-proxy/switchyard/dataplane/conntrack"
	switchyardv1 "github.com/switchyard-proxy/switchyard/proto/switchyard/v1"
)

// Service is one view read for one family.
type Service struct {
	// Name is "namespace/name".
	Name, Namespace, ServiceName string
	// HealthCheckNodePort is set with externalTrafficPolicy Local only.
	HealthCheckNodePort uint32
	Ports               []Port
}

// Port is one service port with everything its rules need.
type Port struct {
	// Name is the port's name ("" for a single unnamed port); Label is
	// "namespace/name[:port]", as kube-proxy's rule comments say it.
	Name, Label    string
	Protocol       dataplane.Protocol
	Port, NodePort uint32
	ClusterIPs     []netip.Addr
	ExternalIPs    []netip.Addr
	LBIPs          []netip.Addr
	SourceRanges   []netip.Prefix
	// HasRanges: the service has source ranges in some family; traffic
	// from outside them is dropped even when none is of this family.
	HasRanges bool
	// Cluster and Local are the endpoints serving this port, sorted by
	// address and port and deduplicated by both (the first occurrence
	// wins): one pod address may serve a port on two target ports.
	Cluster, Local []Endpoint
	// Affinity is the ClientIP timeout in seconds, 0 without affinity.
	Affinity uint32
	// Algorithm spreads new connections over a set (balance.go); with a
	// hashed one, ClusterTable and LocalTable are the tables of Cluster
	// and Local (nil for an empty set). Affinity, where set, still wins
	// for a client it remembers.
	Algorithm                Algorithm
	ClusterTable, LocalTable *Table

	// The decision every mode programs (decide.go): which endpoints
	// internal and external traffic use, and what each does without one.
	// Modes read it and never re-derive it from policies or sets.
	Internal, External Traffic
	// ShortCircuit: node and pod traffic to the external addresses goes
	// to Cluster despite an external Local policy.
	ShortCircuit bool
}

// Endpoint is one backend of a port. Terminating matters to modes that
// drain (ipvs); the control plane already chose which endpoints serve.
type Endpoint struct {
	Addr        netip.AddrPort
	Terminating bool
}

// SkipFunc receives input left out, with the service it belongs to, in
// input order.
type SkipFunc func(service, reason string)

// Read reads the view stored under key for family f. ok is false when the
// whole view is unusable (bad name, or a key that is not its name: two
// keys for one service would program the same objects twice).
func Read(key string, sv *switchyardv1.ServiceView, f dataplane.Family, skip SkipFunc) (svc Service, ok bool) {
	skipf := func(service, format string, args ...any) { skip(service, fmt.Sprintf(format, args...)) }
	if sv == nil || CheckNamespace(sv.GetNamespace()) != nil || CheckServiceName(sv.GetName()) != nil {
		skipf(key, "bad or missing namespace/name")
		return svc, false
	}
	name := sv.GetNamespace() + "/" + sv.GetName()
	if key != name {
		skipf(key, "resource name does not match %s", name)
		return svc, false
	}
	svc = Service{Name: name, Namespace: sv.GetNamespace(), ServiceName: sv.GetName()}
	pol := policyOf(sv)
	base := Port{HasRanges: len(sv.GetLoadBalancerSourceRanges()) > 0}
	if sv.GetSessionAffinity() == switchyardv1.SessionAffinity_SESSION_AFFINITY_CLIENT_IP {
		base.Affinity = max(sv.GetSessionAffinityTimeoutSeconds(), 1)
	}
	base.ClusterIPs = addrs(name, sv.GetClusterIps(), f, skipf)
	base.ExternalIPs = addrs(name, sv.GetExternalIps(), f, skipf)
	base.LBIPs = addrs(name, sv.GetLoadBalancerIps(), f, skipf)
	for _, s := range sv.GetLoadBalancerSourceRanges() {
		p, ok, err := f.ParsePrefix(s)
		if err != nil {
			skipf(name, "source range: %v", err)
		} else if ok {
			base.SourceRanges = append(base.SourceRanges, p)
		}
	}
	if hc := sv.GetHealthCheckNodePort(); hc > 0 && hc < 65536 && pol.extLocal {
		svc.HealthCheckNodePort = hc
	}
	// Each endpoint address is parsed once, not once per port, into
	// buffers on the stack: the usual view has a few endpoints, and an
	// allocation per read would cost more than the parses it saves.
	var clusterBuf, localBuf [8]parsedEndpoint
	cluster := parseEndpoints(clusterBuf[:0], sv.GetClusterEndpoints(), f)
	local := parseEndpoints(localBuf[:0], sv.GetLocalEndpoints(), f)
	seen := map[string]bool{}
	for _, sp := range sv.GetPorts() {
		proto, ok := dataplane.ProtocolOf(sp.GetProtocol())
		switch {
		case !ok:
			skipf(name, "port %q: unknown protocol %v", sp.GetName(), sp.GetProtocol())
			continue
		case CheckPortName(sp.GetName()) != nil || seen[sp.GetName()]:
			skipf(name, "port %q: bad or duplicate name", sp.GetName())
			continue
		case sp.GetPort() == 0 || sp.GetPort() > 65535 || sp.GetNodePort() > 65535:
			skipf(name, "port %q: bad port number", sp.GetName())
			continue
		}
		seen[sp.GetName()] = true
		p := base
		p.Name, p.Label = sp.GetName(), name
		if p.Name != "" {
			p.Label += ":" + p.Name
		}
		p.Protocol, p.Port, p.NodePort = proto, sp.GetPort(), sp.GetNodePort()
		p.Cluster = endpoints(name, p.Name, cluster, skipf)
		p.Local = endpoints(name, p.Name, local, skipf)
		p.readBalance(name, sv, f, skipf)
		p.decide(sp, pol)
		svc.Ports = append(svc.Ports, p)
	}
	return svc, true
}

// addrs parses the addresses of family f, skipping bad ones.
func addrs(svc string, in []string, f dataplane.Family, skipf func(string, string, ...any)) []netip.Addr {
	var out []netip.Addr
	for _, s := range in {
		a, ok, err := f.ParseAddr(s)
		if err != nil {
			skipf(svc, "%v", err)
		} else if ok && !slices.Contains(out, a) {
			out = append(out, a)
		}
	}
	return out
}

// parsedEndpoint is an endpoint of a view with its address read for one
// family: addr is invalid when the address is of the other family or
// bad (err says why).
type parsedEndpoint struct {
	ep   *switchyardv1.Endpoint
	addr netip.Addr
	err  error
}

// parseEndpoints appends the endpoints of in, read for family f, to dst.
func parseEndpoints(dst []parsedEndpoint, in []*switchyardv1.Endpoint, f dataplane.Family) []parsedEndpoint {
	dst = slices.Grow(dst, len(in))
	for _, ep := range in {
		pe := parsedEndpoint{ep: ep}
		var ok bool
		if pe.addr, ok, pe.err = f.ParseAddr(ep.GetAddress()); !ok {
			pe.addr = netip.Addr{}
		}
		dst = append(dst, pe)
	}
	return dst
}

// endpoints returns the endpoints of in that serve port name,
// deduplicated by address and port, as kube-proxy identifies an endpoint,
// and sorted. A bad address is reported for each port that reads it, as
// it always was.
func endpoints(svc, name string, in []parsedEndpoint, skipf func(string, string, ...any)) []Endpoint {
	var out []Endpoint
	seen := map[netip.AddrPort]bool{}
	for _, pe := range in {
		if pe.err != nil {
			skipf(svc, "endpoint: %v", pe.err)
			continue
		}
		if !pe.addr.IsValid() {
			continue
		}
		for _, pt := range pe.ep.GetPorts() {
			if pt.GetName() != name || pt.GetPort() == 0 || pt.GetPort() > 65535 {
				continue
			}
			if ap := netip.AddrPortFrom(pe.addr, uint16(pt.GetPort())); !seen[ap] {
				seen[ap] = true
				out = append(out, Endpoint{Addr: ap, Terminating: pe.ep.GetTerminating()})
			}
		}
	}
	slices.SortFunc(out, func(x, y Endpoint) int { return x.Addr.Compare(y.Addr) })
	return out
}

// UDPFlows is what conntrack cleanup needs to know of a UDP port (ok is
// false for other protocols): its service addresses with the port, its
// node port and every endpoint (address and target port), cluster ones
// first.
func (p *Port) UDPFlows() (u conntrack.UDPPort, ok bool) {
	if p.Protocol != dataplane.UDP {
		return u, false
	}
	u.NodePort = uint16(p.NodePort)
	for _, list := range [][]netip.Addr{p.ClusterIPs, p.ExternalIPs, p.LBIPs} {
		for _, a := range list {
			u.Dsts = append(u.Dsts, netip.AddrPortFrom(a, uint16(p.Port)))
		}
	}
	for _, eps := range [][]Endpoint{p.Cluster, p.Local} {
		for _, ep := range eps {
			u.AddEndpoint(ep.Addr)
		}
	}
	return u, true
}

// Unchanged reports whether a view renders as old did: the same message
// (an agent keeps unchanged resources, and a State is immutable once
// applied) or an equal one (a resend after a reconnect). Render memos
// reuse a service's output on it.
func Unchanged(old, sv *switchyardv1.ServiceView) bool {
	return old == sv || proto.Equal(old, sv)
}
