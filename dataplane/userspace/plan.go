package userspace

import (
	"cmp"
	"fmt"
	"net/netip"
	"slices"
	"sort"
	"time"

	"github.com/switchyard-proxy/switchyard/dataplane"
	switchyardv1 "github.com/switchyard-proxy/switchyard/proto/switchyard/v1"
)

// Protocol is a frontend's transport protocol.
type Protocol string

// Protocols the mode proxies. SCTP is skipped: the Go standard library has
// no SCTP sockets.
const (
	TCP Protocol = "tcp"
	UDP Protocol = "udp"
)

// Kind says how a frontend address was reached.
type Kind string

// Frontend kinds.
const (
	KindClusterIP      Kind = "clusterIP"
	KindExternalIP     Kind = "externalIP"
	KindLoadBalancerIP Kind = "loadBalancerIP"
	KindNodePort       Kind = "nodePort"
)

// frontendKey identifies a listener: the protocol and the address clients
// connect to (unspecified address for a node port on every address).
type frontendKey struct {
	proto Protocol
	addr  netip.AddrPort
}

func (k frontendKey) String() string { return string(k.proto) + "/" + k.addr.String() }

// frontend is what one listener forwards to: the plan of one service port
// on one address. It holds no I/O and is compared by value.
type frontend struct {
	key      frontendKey
	service  string // "namespace/name"
	port     string // service port name
	kind     Kind
	backends []netip.AddrPort // sorted, deduplicated
	affinity time.Duration    // ClientIP timeout; 0 without affinity
}

func (f frontend) label() string {
	if f.port == "" {
		return f.service
	}
	return f.service + ":" + f.port
}

// Skip is one piece of input the plan ignored.
type Skip struct {
	Service string
	Reason  string
}

// planResult is the desired set of listeners.
type planResult struct {
	fronts map[frontendKey]frontend
	// empty are the frontends with no backend for their traffic: they get
	// no listener, so the kernel refuses (TCP RST, ICMP port unreachable
	// for UDP) wherever the address is local.
	empty []frontendKey
	skips []Skip
}

// plan turns a State into frontends without any I/O. Services are walked in
// name order, so when two services claim one address and port the first
// name keeps it and the other is skipped, deterministically.
func plan(st *dataplane.State) planResult {
	r := planResult{fronts: map[frontendKey]frontend{}}
	var nodeIPs []netip.Addr
	for _, s := range st.Config.GetNodeIps() {
		a, err := netip.ParseAddr(s)
		if err != nil {
			r.skip("", "node config: node IP %q: %v", s, err)
			continue
		}
		nodeIPs = append(nodeIPs, a.Unmap())
	}
	if len(nodeIPs) == 0 {
		// Node ports on every address, as kube-proxy without
		// --nodeport-addresses.
		nodeIPs = []netip.Addr{netip.IPv4Unspecified(), netip.IPv6Unspecified()}
	}
	names := make([]string, 0, len(st.Services))
	for n := range st.Services {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		r.service(n, st.Services[n], nodeIPs)
	}
	slices.SortFunc(r.empty, func(a, b frontendKey) int {
		return cmp.Or(cmp.Compare(a.proto, b.proto), a.addr.Compare(b.addr))
	})
	return r
}

func (r *planResult) skip(svc, format string, args ...any) {
	r.skips = append(r.skips, Skip{Service: svc, Reason: fmt.Sprintf(format, args...)})
}

var protocols = map[switchyardv1.Protocol]Protocol{
	switchyardv1.Protocol_PROTOCOL_TCP: TCP,
	switchyardv1.Protocol_PROTOCOL_UDP: UDP,
}

func (r *planResult) service(key string, sv *switchyardv1.ServiceView, nodeIPs []netip.Addr) {
	if sv == nil || sv.GetNamespace() == "" || sv.GetName() == "" {
		r.skip(key, "missing namespace or name")
		return
	}
	if name := sv.GetNamespace() + "/" + sv.GetName(); key != name {
		r.skip(key, "resource name does not match %s", name)
		return
	}
	var affinity time.Duration
	if sv.GetSessionAffinity() == switchyardv1.SessionAffinity_SESSION_AFFINITY_CLIENT_IP {
		affinity = time.Duration(max(sv.GetSessionAffinityTimeoutSeconds(), 1)) * time.Second
	}
	intLocal := sv.GetInternalTrafficPolicy() == switchyardv1.TrafficPolicy_TRAFFIC_POLICY_LOCAL
	extLocal := sv.GetExternalTrafficPolicy() == switchyardv1.TrafficPolicy_TRAFFIC_POLICY_LOCAL
	clusterIPs := r.addrs(key, sv.GetClusterIps())
	externalIPs := r.addrs(key, sv.GetExternalIps())
	lbIPs := r.addrs(key, sv.GetLoadBalancerIps())
	seen := map[string]bool{}
	for _, sp := range sv.GetPorts() {
		proto, ok := protocols[sp.GetProtocol()]
		switch {
		case !ok:
			r.skip(key, "port %q: protocol %v not proxied in userspace", sp.GetName(), sp.GetProtocol())
			continue
		case seen[sp.GetName()]:
			r.skip(key, "port %q: duplicate name", sp.GetName())
			continue
		case sp.GetPort() == 0 || sp.GetPort() > 65535 || sp.GetNodePort() > 65535:
			r.skip(key, "port %q: bad port number", sp.GetName())
			continue
		}
		seen[sp.GetName()] = true
		cluster := r.endpoints(key, sp.GetName(), sv.GetClusterEndpoints())
		local := r.endpoints(key, sp.GetName(), sv.GetLocalEndpoints())
		// Internal traffic (cluster IPs) follows internalTrafficPolicy,
		// external traffic (node ports, external and load-balancer IPs)
		// externalTrafficPolicy, as the ServiceView documents.
		internal, external := cluster, cluster
		if intLocal {
			internal = local
		}
		if extLocal {
			external = local
		}
		base := frontend{service: key, port: sp.GetName(), affinity: affinity}
		add := func(kind Kind, ips []netip.Addr, port uint32, eps []netip.AddrPort) {
			for _, ip := range ips {
				f := base
				f.kind = kind
				f.key = frontendKey{proto: proto, addr: netip.AddrPortFrom(ip, uint16(port))}
				// Only backends of the frontend's family: a proxy could
				// cross families, but kube-proxy never does.
				for _, ep := range eps {
					if ep.Addr().Is4() == ip.Is4() {
						f.backends = append(f.backends, ep)
					}
				}
				r.add(f)
			}
		}
		add(KindClusterIP, clusterIPs, sp.GetPort(), internal)
		add(KindExternalIP, externalIPs, sp.GetPort(), external)
		add(KindLoadBalancerIP, lbIPs, sp.GetPort(), external)
		if sp.GetNodePort() > 0 {
			add(KindNodePort, nodeIPs, sp.GetNodePort(), external)
		}
	}
}

func (r *planResult) add(f frontend) {
	if old, dup := r.fronts[f.key]; dup {
		r.skip(f.service, "%s %s already used by %s", f.kind, f.key, old.label())
		return
	}
	if slices.Contains(r.empty, f.key) {
		r.skip(f.service, "%s %s already used by another service", f.kind, f.key)
		return
	}
	if len(f.backends) == 0 {
		r.empty = append(r.empty, f.key)
		return
	}
	r.fronts[f.key] = f
}

// addrs parses addresses, skipping bad and duplicate ones.
func (r *planResult) addrs(svc string, in []string) []netip.Addr {
	var out []netip.Addr
	for _, s := range in {
		a, err := netip.ParseAddr(s)
		if err != nil || a.Zone() != "" {
			r.skip(svc, "bad address %q", s)
			continue
		}
		if a = a.Unmap(); !slices.Contains(out, a) {
			out = append(out, a)
		}
	}
	return out
}

// endpoints returns the backends serving port name, sorted and
// deduplicated: an endpoint serves exactly the ports it lists.
func (r *planResult) endpoints(svc, name string, in []*switchyardv1.Endpoint) []netip.AddrPort {
	var out []netip.AddrPort
	for _, ep := range in {
		a, err := netip.ParseAddr(ep.GetAddress())
		if err != nil || a.Zone() != "" {
			r.skip(svc, "endpoint: bad address %q", ep.GetAddress())
			continue
		}
		for _, pt := range ep.GetPorts() {
			if pt.GetName() != name || pt.GetPort() == 0 || pt.GetPort() > 65535 {
				continue
			}
			if ap := netip.AddrPortFrom(a.Unmap(), uint16(pt.GetPort())); !slices.Contains(out, ap) {
				out = append(out, ap)
			}
		}
	}
	slices.SortFunc(out, netip.AddrPort.Compare)
	return out
}
