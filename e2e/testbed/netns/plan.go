package netns

import (
	"cmp"
	"fmt"
	"net/netip"
	"slices"
	"strconv"
)

// Interface names. Every interface lives in a namespace of its own topology,
// so the names are fixed and never collide with the machine's or with those
// of a topology built by another test binary. All fit in IFNAMSIZ-1 (15).
const (
	// NetworkBridge is the bridge in the net namespace.
	NetworkBridge = "br0"
	// NodeBridge is the pod bridge in every node namespace.
	NodeBridge = "cbr0"
	// Uplink is the interface of node, pod, client and control namespaces
	// towards their bridge.
	Uplink = "eth0"
	// maxIfName is IFNAMSIZ-1.
	maxIfName = 15
)

// Route is one route of a namespace, of either family.
type Route struct {
	Dst netip.Prefix
	Via netip.Addr // invalid: on-link out of Dev
	Dev string
}

func (r Route) String() string {
	if r.Via.IsValid() {
		return fmt.Sprintf("%s via %s dev %s", r.Dst, r.Via, r.Dev)
	}
	return fmt.Sprintf("%s dev %s", r.Dst, r.Dev)
}

// Sysctl is one sysctl setting, key in dotted form.
type Sysctl struct {
	Key, Value string
}

// Network is the shared L2 segment: a bridge in a namespace of its own.
type Network struct {
	NS      string
	CIDR    netip.Prefix
	CIDR6   netip.Prefix // invalid unless dual-stack
	Bridge  string
	Sysctls []Sysctl
}

// Host is a namespace attached to the network that is not a node: the client
// and the control namespace.
type Host struct {
	Name   string
	NS     string
	IP     netip.Addr
	Subnet netip.Prefix // the network CIDR
	// IP6 and Subnet6 are the IPv6 address and network CIDR of a
	// dual-stack topology, invalid otherwise (likewise in Node and Pod).
	IP6     netip.Addr
	Subnet6 netip.Prefix
	NetPort string // its bridge port in the net namespace
	Routes  []Route
}

// Node is a node namespace: an uplink on the network and a pod bridge.
type Node struct {
	Index      int
	Name       string
	NS         string
	IP         netip.Addr
	Subnet     netip.Prefix // the network CIDR
	NetPort    string       // its bridge port in the net namespace
	PodCIDR    netip.Prefix
	PodGateway netip.Addr // address of NodeBridge
	// The IPv6 counterparts of IP, Subnet, PodCIDR and PodGateway.
	IP6, PodGateway6  netip.Addr
	Subnet6, PodCIDR6 netip.Prefix
	Pods              []Pod
	Routes            []Route
	Sysctls           []Sysctl
}

// Pod is a pod namespace attached to its node's bridge.
type Pod struct {
	Index    int // global index: pod-<Index>
	Name     string
	NS       string
	Node     int
	IP       netip.Addr
	Subnet   netip.Prefix // the node's pod CIDR
	IP6      netip.Addr
	Subnet6  netip.Prefix // the node's IPv6 pod CIDR
	NodePort string       // its bridge port in the node namespace
	Routes   []Route
}

// Plan is a fully resolved topology: names, addresses, routes and sysctls.
// It is computed without I/O by NewPlan.
type Plan struct {
	ID          string
	Network     Network
	Nodes       []Node
	Client      Host
	Control     Host
	ServiceCIDR netip.Prefix
	// ServiceCIDR6 is the IPv6 service CIDR, invalid unless dual-stack.
	ServiceCIDR6 netip.Prefix
	GatewayNode  int
	// NoPodBridge: nodes have no pod bridge (Spec.NoPodBridge).
	NoPodBridge bool
}

// NewPlan resolves spec (zero fields take defaults) for the topology id.
func NewPlan(spec Spec, id string) (Plan, error) {
	s := spec.withDefaults()
	if err := s.validate(); err != nil {
		return Plan{}, fmt.Errorf("invalid spec: %w", err)
	}
	if !idPattern.MatchString(id) {
		return Plan{}, fmt.Errorf("invalid topology id %q: want %s", id, idPattern)
	}
	base := s.Prefix + id + "-"
	p := Plan{
		ID: id,
		Network: Network{NS: base + "net", CIDR: s.NetworkCIDR, CIDR6: s.NetworkCIDR6,
			Bridge: NetworkBridge, Sysctls: networkSysctls()},
		ServiceCIDR: s.ServiceCIDR, ServiceCIDR6: s.ServiceCIDR6,
		GatewayNode: s.GatewayNode,
		NoPodBridge: s.NoPodBridge,
	}
	for i := range s.Nodes {
		n, err := planNode(s, base, i)
		if err != nil {
			return Plan{}, err
		}
		p.Nodes = append(p.Nodes, n)
	}
	for k := range s.podCount() {
		i := k % s.Nodes
		pod, err := planPod(s, base, k, &p.Nodes[i])
		if err != nil {
			return Plan{}, err
		}
		p.Nodes[i].Pods = append(p.Nodes[i].Pods, pod)
	}
	for i := range p.Nodes {
		p.Nodes[i].Routes = nodeRoutes(p, i)
	}
	var err error
	if p.Client, err = planHost(s, p, "client", base, s.ClientHost); err != nil {
		return Plan{}, err
	}
	if p.Control, err = planHost(s, p, "control", base, s.ControlHost); err != nil {
		return Plan{}, err
	}
	if err := p.checkUnique(); err != nil {
		return Plan{}, err
	}
	return p, nil
}

func planNode(s Spec, base string, i int) (Node, error) {
	n := Node{
		Index: i, Name: "node-" + strconv.Itoa(i), NS: base + "node" + strconv.Itoa(i),
		NetPort: "node" + strconv.Itoa(i), Sysctls: nodeSysctls(s),
	}
	for _, f := range s.families() {
		ip, err := hostAddr(f.network, s.FirstNodeHost+i)
		if err != nil {
			return Node{}, fmt.Errorf("node %d %s address: %w", i, f.name, err)
		}
		cidr, err := subnet(f.cluster, f.nodeBits, i)
		if err != nil {
			return Node{}, fmt.Errorf("node %d %s pod CIDR: %w", i, f.name, err)
		}
		gw, err := hostAddr(cidr, 1)
		if err != nil {
			return Node{}, fmt.Errorf("node %d %s pod gateway: %w", i, f.name, err)
		}
		if f.v6 {
			n.IP6, n.Subnet6, n.PodCIDR6, n.PodGateway6 = ip, f.network, cidr, gw
		} else {
			n.IP, n.Subnet, n.PodCIDR, n.PodGateway = ip, f.network, cidr, gw
		}
	}
	return n, checkIfName(n.NetPort)
}

func planPod(s Spec, base string, k int, n *Node) (Pod, error) {
	pod := Pod{
		Index: k, Name: "pod-" + strconv.Itoa(k), NS: base + "pod" + strconv.Itoa(k),
		Node: n.Index, NodePort: "vpod" + strconv.Itoa(k),
	}
	for _, f := range s.families() {
		cidr, gw := n.PodCIDR, n.PodGateway
		if f.v6 {
			cidr, gw = n.PodCIDR6, n.PodGateway6
		}
		ip, err := hostAddr(cidr, 2+len(n.Pods))
		if err != nil {
			return Pod{}, fmt.Errorf("pod %d on %s: %w", k, n.Name, err)
		}
		if f.v6 {
			pod.IP6, pod.Subnet6 = ip, cidr
		} else {
			pod.IP, pod.Subnet = ip, cidr
		}
		pod.Routes = append(pod.Routes, Route{Dst: f.defaultRoute, Via: gw, Dev: Uplink})
	}
	return pod, checkIfName(pod.NodePort)
}

// nodeRoutes: other nodes' pod CIDRs via those nodes, and the service CIDR
// on-link out of the uplink so that connect() reaches the NAT hooks; IPv4
// first, then the same in IPv6 on a dual-stack plan.
func nodeRoutes(p Plan, i int) []Route {
	var rs []Route
	for j, other := range p.Nodes {
		if j != i {
			rs = append(rs, Route{Dst: other.PodCIDR, Via: other.IP, Dev: Uplink})
		}
	}
	rs = append(rs, Route{Dst: p.ServiceCIDR, Dev: Uplink})
	if !p.DualStack() {
		return rs
	}
	for j, other := range p.Nodes {
		if j != i {
			rs = append(rs, Route{Dst: other.PodCIDR6, Via: other.IP6, Dev: Uplink})
		}
	}
	return append(rs, Route{Dst: p.ServiceCIDR6, Dev: Uplink})
}

func planHost(s Spec, p Plan, name, base string, host int) (Host, error) {
	h := Host{Name: name, NS: base + name, NetPort: name}
	for _, f := range s.families() {
		ip, err := hostAddr(f.network, host)
		if err != nil {
			return Host{}, fmt.Errorf("%s %s address: %w", name, f.name, err)
		}
		gw := p.Nodes[s.GatewayNode]
		via := func(n Node) netip.Addr { return n.IP }
		if f.v6 {
			h.IP6, h.Subnet6 = ip, f.network
			via = func(n Node) netip.Addr { return n.IP6 }
		} else {
			h.IP, h.Subnet = ip, f.network
		}
		for _, n := range p.Nodes {
			hop := via(n)
			if s.PodRoutesViaGateway {
				hop = via(gw)
			}
			h.Routes = append(h.Routes, Route{Dst: n.podCIDR(f.v6), Via: hop, Dev: Uplink})
		}
		h.Routes = append(h.Routes, Route{Dst: f.service, Via: via(gw), Dev: Uplink})
	}
	return h, checkIfName(h.NetPort)
}

func nodeSysctls(s Spec) []Sysctl {
	bridgeNF := "1"
	if s.DisableBridgeNF {
		bridgeNF = "0"
	}
	out := []Sysctl{
		{"net.ipv4.ip_forward", "1"},
		{"net.ipv4.conf.all.rp_filter", "0"},
		{"net.ipv4.conf.default.rp_filter", "0"},
		{"net.bridge.bridge-nf-call-iptables", bridgeNF},
	}
	if s.RouteLocalnet {
		out = append(out, Sysctl{"net.ipv4.conf.all.route_localnet", "1"})
	}
	if s.NoICMPRateLimit {
		out = append(out, Sysctl{"net.ipv4.icmp_ratelimit", "0"})
		if s.DualStack {
			out = append(out, Sysctl{"net.ipv6.icmp.ratelimit", "0"})
		}
	}
	if s.DualStack {
		// IPv6 has no rp_filter sysctl; forwarding on "all" turns every
		// interface into a router.
		out = append(out, Sysctl{"net.ipv6.conf.all.forwarding", "1"},
			Sysctl{"net.bridge.bridge-nf-call-ip6tables", bridgeNF})
	}
	return out
}

// networkSysctls keep the network bridge a plain switch: no netfilter.
func networkSysctls() []Sysctl {
	return []Sysctl{
		{"net.bridge.bridge-nf-call-iptables", "0"},
		{"net.bridge.bridge-nf-call-ip6tables", "0"},
		{"net.bridge.bridge-nf-call-arptables", "0"},
	}
}

func checkIfName(name string) error {
	if name == "" || len(name) > maxIfName {
		return fmt.Errorf("interface name %q must be 1..%d characters", name, maxIfName)
	}
	return nil
}

// checkUnique rejects plans where two namespaces share an address on the
// network (e.g. ClientHost inside the node range).
func (p Plan) checkUnique() error {
	seen := map[netip.Addr]string{}
	add := func(ip netip.Addr, who string) error {
		if prev, ok := seen[ip]; ok {
			return fmt.Errorf("address %s assigned to both %s and %s", ip, prev, who)
		}
		seen[ip] = who
		return nil
	}
	addAll := func(who string, ips ...netip.Addr) error {
		for _, ip := range ips {
			if !ip.IsValid() { // no IPv6 on an IPv4-only plan
				continue
			}
			if err := add(ip, who); err != nil {
				return err
			}
		}
		return nil
	}
	for _, n := range p.Nodes {
		if err := addAll(n.Name, n.IP, n.IP6); err != nil {
			return err
		}
	}
	if err := addAll(p.Client.Name, p.Client.IP, p.Client.IP6); err != nil {
		return err
	}
	return addAll(p.Control.Name, p.Control.IP, p.Control.IP6)
}

// DualStack reports whether the plan carries IPv6 beside IPv4.
func (p Plan) DualStack() bool { return p.ServiceCIDR6.IsValid() }

// podCIDR is the node's pod CIDR of one family.
func (n Node) podCIDR(v6 bool) netip.Prefix {
	if v6 {
		return n.PodCIDR6
	}
	return n.PodCIDR
}

// family is one IP family's address plan of a defaulted spec.
type family struct {
	name                      string
	v6                        bool
	network, cluster, service netip.Prefix
	nodeBits                  int
	defaultRoute              netip.Prefix
}

// families lists IPv4 and, on a dual-stack spec, IPv6 after it: every
// address and route is planned in that order.
func (s Spec) families() []family {
	out := []family{{name: "IPv4", network: s.NetworkCIDR, cluster: s.ClusterCIDR, service: s.ServiceCIDR,
		nodeBits: s.NodeCIDRBits, defaultRoute: netip.MustParsePrefix("0.0.0.0/0")}}
	if s.DualStack {
		out = append(out, family{name: "IPv6", v6: true, network: s.NetworkCIDR6, cluster: s.ClusterCIDR6,
			service: s.ServiceCIDR6, nodeBits: s.NodeCIDRBits6, defaultRoute: netip.MustParsePrefix("::/0")})
	}
	return out
}

// Namespaces lists every namespace of the plan in creation order: network,
// nodes, pods, client, control.
func (p Plan) Namespaces() []string {
	out := []string{p.Network.NS}
	for _, n := range p.Nodes {
		out = append(out, n.NS)
	}
	for _, pod := range p.Pods() {
		out = append(out, pod.NS)
	}
	return append(out, p.Client.NS, p.Control.NS)
}

// Pods lists all pods ordered by index.
func (p Plan) Pods() []Pod {
	var out []Pod
	for _, n := range p.Nodes {
		out = append(out, n.Pods...)
	}
	slices.SortFunc(out, func(a, b Pod) int { return cmp.Compare(a.Index, b.Index) })
	return out
}

// Pod returns the pod with the given name ("pod-3").
func (p Plan) Pod(name string) (Pod, bool) {
	for _, pod := range p.Pods() {
		if pod.Name == name {
			return pod, true
		}
	}
	return Pod{}, false
}
