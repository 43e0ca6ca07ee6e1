package userspace

import (
	"cmp"
	"fmt"
	"net/netip"
	"slices"
	"time"

	"github.com/switchyard-proxy/switchyard/dataplane"
	"github.com/switchyard-proxy/switchyard/dataplane/internal/sorted"
	"github.com/switchyard-proxy/switchyard/dataplane/serviceport"
	switchyardv1 "github.com/switchyard-proxy/switchyard/proto/switchyard/v1"
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
	proto dataplane.Protocol
	addr  netip.AddrPort
}

func (k frontendKey) String() string { return k.proto.String() + "/" + k.addr.String() }

// compare orders keys by protocol, then address and port.
func (k frontendKey) compare(o frontendKey) int {
	return cmp.Or(cmp.Compare(k.proto, o.proto), k.addr.Compare(o.addr))
}

// frontend is what one listener forwards to: the plan of one service port
// on one address. It holds no I/O and is compared by value.
type frontend struct {
	key      frontendKey
	service  string // "namespace/name"
	port     string // service port name
	label    string // "namespace/name[:port]", serviceport's Port.Label
	kind     Kind
	backends []netip.AddrPort // sorted, deduplicated
	affinity time.Duration    // ClientIP timeout; 0 without affinity
	// hash is the hashed algorithm's table over backends, when the
	// port's algorithm is maglev or source-hash.
	hash hashing
}

// planResult is the desired set of listeners.
type planResult struct {
	fronts map[frontendKey]frontend
	// empty are the frontends with no backend for their traffic: they get
	// no listener, so the kernel refuses (TCP RST, ICMP port unreachable
	// for UDP) wherever the address is local.
	empty []frontendKey
	skips []dataplane.Skip
	seen  map[dataplane.Skip]bool
}

// plan turns a State into frontends without any I/O. Views are read and
// decided by serviceport, as for every mode, one family at a time: a
// frontend's backends are of its own family (a proxy could cross
// families, but kube-proxy never does). Services are walked in name
// order, so when two services claim one address and port the first name
// keeps it and the other is skipped, deterministically.
func plan(st *dataplane.State) planResult {
	r := planResult{fronts: map[frontendKey]frontend{}, seen: map[dataplane.Skip]bool{}}
	nodeIPs := r.nodeIPs(st.Config)
	for _, n := range sorted.Keys(st.Services) {
		r.service(n, st.Services[n], nodeIPs)
	}
	slices.SortFunc(r.empty, frontendKey.compare)
	return r
}

// skip records a skip once: each family's read reports the same bad input.
func (r *planResult) skip(svc, reason string) {
	s := dataplane.Skip{Service: svc, Reason: reason}
	if !r.seen[s] {
		r.seen[s] = true
		r.skips = append(r.skips, s)
	}
}

// families are the families the mode listens in, in the order planned.
var families = []dataplane.Family{dataplane.IPv4, dataplane.IPv6}

// nodeIPs returns the addresses node ports listen on, by family: the
// NodeConfig's node IPs that node_port_addresses selects (every one by
// default: a listener is per address, and this mode lists no kernel
// addresses), or when the NodeConfig has no node IP at all, the
// unspecified address of both families, as kube-proxy without
// --nodeport-addresses.
func (r *planResult) nodeIPs(cfg *switchyardv1.NodeConfig) map[dataplane.Family][]netip.Addr {
	out := map[dataplane.Family][]netip.Addr{}
	known := false
	for _, f := range families {
		n := serviceport.ReadNode(cfg, f, serviceport.NodePortsAll, r.skip)
		known = known || len(n.NodeIPs) > 0
		for _, a := range n.NodeIPs {
			if n.NodePorts.Matches(a) {
				out[f] = append(out[f], a)
			}
		}
	}
	if !known {
		out[dataplane.IPv4] = []netip.Addr{netip.IPv4Unspecified()}
		out[dataplane.IPv6] = []netip.Addr{netip.IPv6Unspecified()}
	}
	return out
}

// service plans every port of one view: internal traffic (cluster IPs)
// and external traffic (external and load-balancer IPs, node ports) on
// the endpoints serviceport decided for each. With none, a frontend gets
// no listener whether the decision is to reject or to drop (doc.go).
func (r *planResult) service(key string, sv *switchyardv1.ServiceView, nodeIPs map[dataplane.Family][]netip.Addr) {
	for _, f := range families {
		svc, ok := serviceport.Read(key, sv, f, r.skip)
		if !ok {
			return
		}
		for i := range svc.Ports {
			p := &svc.Ports[i]
			// SCTP is skipped: the Go standard library has no SCTP sockets.
			proto := p.Protocol
			if proto != dataplane.TCP && proto != dataplane.UDP {
				r.skip(key, fmt.Sprintf("port %q: protocol %s not proxied in userspace", p.Name, proto.Upper()))
				continue
			}
			base := frontend{service: key, port: p.Name, label: p.Label, affinity: time.Duration(p.Affinity) * time.Second}
			r.addAll(base, proto, KindClusterIP, p.ClusterIPs, p.Port, p.Internal, p)
			r.addAll(base, proto, KindExternalIP, p.ExternalIPs, p.Port, p.External, p)
			r.addAll(base, proto, KindLoadBalancerIP, p.LBIPs, p.Port, p.External, p)
			if p.NodePort > 0 {
				r.addAll(base, proto, KindNodePort, nodeIPs[f], p.NodePort, p.External, p)
			}
		}
	}
}

// addAll adds base's frontend on each of ips, forwarding to t's endpoints.
func (r *planResult) addAll(base frontend, proto dataplane.Protocol, kind Kind, ips []netip.Addr, port uint32, t serviceport.Traffic, p *serviceport.Port) {
	var backends []netip.AddrPort
	for _, ep := range t.Endpoints {
		backends = append(backends, ep.Addr)
	}
	// The table of the set t uses; its slots index that set, which is
	// backends in the same order.
	var h hashing
	if p.Algorithm.Hashed() {
		h = hashing{alg: p.Algorithm, table: p.ClusterTable}
		if t.Local {
			h.table = p.LocalTable
		}
	}
	for _, ip := range ips {
		f := base
		f.kind, f.backends, f.hash = kind, backends, h
		f.key = frontendKey{proto: proto, addr: netip.AddrPortFrom(ip, uint16(port))}
		r.add(f)
	}
}

func (r *planResult) add(f frontend) {
	if old, dup := r.fronts[f.key]; dup {
		r.skip(f.service, fmt.Sprintf("%s %s already used by %s", f.kind, f.key, old.label))
		return
	}
	if slices.Contains(r.empty, f.key) {
		r.skip(f.service, fmt.Sprintf("%s %s already used by another service", f.kind, f.key))
		return
	}
	if len(f.backends) == 0 {
		r.empty = append(r.empty, f.key)
		return
	}
	r.fronts[f.key] = f
}
