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

// Route is one IPv4 route of a namespace.
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
	Bridge  string
	Sysctls []Sysctl
}

// Host is a namespace attached to the network that is not a node: the client
// and the control namespace.
type Host struct {
	Name    string
	NS      string
	IP      netip.Addr
	Subnet  netip.Prefix // the network CIDR
	NetPort string       // its bridge port in the net namespace
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
	Pods       []Pod
	Routes     []Route
	Sysctls    []Sysctl
}

// Pod is a pod namespace attached to its node's bridge.
type Pod struct {
	Index    int // global index: pod-<Index>
	Name     string
	NS       string
	Node     int
	IP       netip.Addr
	Subnet   netip.Prefix // the node's pod CIDR
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
	GatewayNode int
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
		ID:          id,
		Network:     Network{NS: base + "net", CIDR: s.NetworkCIDR, Bridge: NetworkBridge, Sysctls: networkSysctls()},
		ServiceCIDR: s.ServiceCIDR,
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
	ip, err := hostAddr(s.NetworkCIDR, s.FirstNodeHost+i)
	if err != nil {
		return Node{}, fmt.Errorf("node %d address: %w", i, err)
	}
	cidr, err := subnet(s.ClusterCIDR, s.NodeCIDRBits, i)
	if err != nil {
		return Node{}, fmt.Errorf("node %d pod CIDR: %w", i, err)
	}
	gw, err := hostAddr(cidr, 1)
	if err != nil {
		return Node{}, fmt.Errorf("node %d pod gateway: %w", i, err)
	}
	n := Node{
		Index: i, Name: "node-" + strconv.Itoa(i), NS: base + "node" + strconv.Itoa(i),
		IP: ip, Subnet: s.NetworkCIDR, NetPort: "node" + strconv.Itoa(i),
		PodCIDR: cidr, PodGateway: gw, Sysctls: nodeSysctls(s),
	}
	return n, checkIfName(n.NetPort)
}

func planPod(s Spec, base string, k int, n *Node) (Pod, error) {
	ip, err := hostAddr(n.PodCIDR, 2+len(n.Pods))
	if err != nil {
		return Pod{}, fmt.Errorf("pod %d on %s: %w", k, n.Name, err)
	}
	pod := Pod{
		Index: k, Name: "pod-" + strconv.Itoa(k), NS: base + "pod" + strconv.Itoa(k),
		Node: n.Index, IP: ip, Subnet: n.PodCIDR, NodePort: "vpod" + strconv.Itoa(k),
		Routes: []Route{{Dst: netip.MustParsePrefix("0.0.0.0/0"), Via: n.PodGateway, Dev: Uplink}},
	}
	return pod, checkIfName(pod.NodePort)
}

// nodeRoutes: other nodes' pod CIDRs via those nodes, and the service CIDR
// on-link out of the uplink so that connect() reaches the NAT hooks.
func nodeRoutes(p Plan, i int) []Route {
	var rs []Route
	for j, other := range p.Nodes {
		if j != i {
			rs = append(rs, Route{Dst: other.PodCIDR, Via: other.IP, Dev: Uplink})
		}
	}
	return append(rs, Route{Dst: p.ServiceCIDR, Dev: Uplink})
}

func planHost(s Spec, p Plan, name, base string, host int) (Host, error) {
	ip, err := hostAddr(s.NetworkCIDR, host)
	if err != nil {
		return Host{}, fmt.Errorf("%s address: %w", name, err)
	}
	gw := p.Nodes[s.GatewayNode].IP
	h := Host{Name: name, NS: base + name, IP: ip, Subnet: s.NetworkCIDR, NetPort: name}
	for _, n := range p.Nodes {
		via := n.IP
		if s.PodRoutesViaGateway {
			via = gw
		}
		h.Routes = append(h.Routes, Route{Dst: n.PodCIDR, Via: via, Dev: Uplink})
	}
	h.Routes = append(h.Routes, Route{Dst: s.ServiceCIDR, Via: gw, Dev: Uplink})
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
	for _, n := range p.Nodes {
		if err := add(n.IP, n.Name); err != nil {
			return err
		}
	}
	if err := add(p.Client.IP, p.Client.Name); err != nil {
		return err
	}
	return add(p.Control.IP, p.Control.Name)
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
