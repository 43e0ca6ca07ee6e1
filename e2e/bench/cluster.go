package bench

import (
	"fmt"
	"net/netip"
	"strconv"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/switchyard-proxy/switchyard/e2e/testbed/slices"
)

// Namespace holds every generated Service and EndpointSlice.
const Namespace = "bench"

// zones is how many zones the nodes are spread over.
const zones = 10

// Shape is the size of a generated cluster.
type Shape struct {
	Nodes     int
	Services  int
	Endpoints int // per service, in one EndpointSlice
}

func (s Shape) String() string {
	return fmt.Sprintf("%d agents, %s svc × %d ep", s.Nodes, count(s.Services), s.Endpoints)
}

// count writes 1000 as 1k, 10000 as 10k.
func count(n int) string {
	if n >= 1000 && n%1000 == 0 {
		return strconv.Itoa(n/1000) + "k"
	}
	return strconv.Itoa(n)
}

// Cluster is a generated cluster: ClusterIP Services with one TCP port, one
// EndpointSlice each whose ready endpoints are spread over the nodes, and
// the Nodes in 10 zones. Every endpoint change reaches every node's view.
type Cluster struct {
	Shape    Shape
	Services []*corev1.Service
	Slices   []slices.Slice
	Nodes    []*corev1.Node
}

// Generate builds the cluster of shape s.
func Generate(s Shape) *Cluster {
	c := &Cluster{Shape: s}
	for i := range s.Nodes {
		c.Nodes = append(c.Nodes, node(i))
	}
	for i := range s.Services {
		c.Services = append(c.Services, service(i))
		sl := slices.Slice{
			Namespace: Namespace, Service: ServiceName(i), Suffix: "0",
			Ports: []slices.Port{slices.TCP("http", 8080)},
		}
		for j := range s.Endpoints {
			n := (i*s.Endpoints + j) % s.Nodes
			ep := slices.Ready(podIP(i*s.Endpoints + j).String()).OnNode(NodeName(n)).InZone(zone(n))
			sl.Endpoints = append(sl.Endpoints, ep)
		}
		c.Slices = append(c.Slices, sl)
	}
	return c
}

// NodeName names the i-th node, the name agent i subscribes as.
func NodeName(i int) string { return fmt.Sprintf("node-%04d", i) }

// ServiceName names the i-th service.
func ServiceName(i int) string { return fmt.Sprintf("svc-%05d", i) }

// NodeNames returns the names of the cluster's nodes.
func (c *Cluster) NodeNames() []string {
	out := make([]string, len(c.Nodes))
	for i, n := range c.Nodes {
		out[i] = n.Name
	}
	return out
}

// Change returns the i-th change: one endpoint of one service moves to a new
// pod address, so the service's view changes on every node. The change is
// also kept in c, so changes build on each other.
func (c *Cluster) Change(i int) slices.Slice {
	svc := (i * 7919) % len(c.Slices)
	sl := c.Slices[svc]
	eps := append([]slices.Endpoint(nil), sl.Endpoints...)
	j := i % len(eps)
	ep := eps[j]
	ep.Addresses = []string{movedIP(i).String()}
	eps[j] = ep
	sl.Endpoints = eps
	c.Slices[svc] = sl
	return sl
}

func node(i int) *corev1.Node {
	return &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{
			Name:   NodeName(i),
			Labels: map[string]string{corev1.LabelTopologyZone: zone(i), corev1.LabelHostname: NodeName(i)},
		},
		Status: corev1.NodeStatus{Addresses: []corev1.NodeAddress{
			{Type: corev1.NodeInternalIP, Address: nodeIP(i).String()},
		}},
	}
}

func service(i int) *corev1.Service {
	return &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: ServiceName(i), Namespace: Namespace},
		Spec: corev1.ServiceSpec{
			Type:     corev1.ServiceTypeClusterIP,
			Selector: map[string]string{"app": ServiceName(i)},
			Ports: []corev1.ServicePort{{
				Name: "http", Protocol: corev1.ProtocolTCP, Port: 80, TargetPort: intstr.FromString("http"),
			}},
		},
	}
}

// withIdentity returns a copy of svc as the API server would return it:
// with a UID and a cluster IP (path b has no API server to allocate them).
func withIdentity(svc *corev1.Service, i int) *corev1.Service {
	svc = svc.DeepCopy()
	svc.UID = types.UID(fmt.Sprintf("00000000-0000-4000-8000-%012d", i))
	ip := add(netip.MustParseAddr("10.96.0.1"), i).String()
	svc.Spec.ClusterIP, svc.Spec.ClusterIPs = ip, []string{ip}
	svc.Spec.IPFamilies = []corev1.IPFamily{corev1.IPv4Protocol}
	svc.Spec.SessionAffinity = corev1.ServiceAffinityNone
	local := corev1.ServiceInternalTrafficPolicyCluster
	svc.Spec.InternalTrafficPolicy = &local
	return svc
}

// Objects returns the cluster as API objects for the in-memory feed.
func (c *Cluster) Objects() (Objects, error) {
	var o Objects
	for i, svc := range c.Services {
		full := withIdentity(svc, i)
		o.Services = append(o.Services, *full)
		es, err := slices.Build(full, c.Slices[i], metav1.Now().Time)
		if err != nil {
			return Objects{}, err
		}
		o.EndpointSlices = append(o.EndpointSlices, *es)
	}
	for _, n := range c.Nodes {
		o.Nodes = append(o.Nodes, *n)
	}
	return o, nil
}

// Objects is the JSON file format of controlplane/internal/bench.Objects.
type Objects struct {
	Services       []corev1.Service            `json:"services"`
	EndpointSlices []discoveryv1.EndpointSlice `json:"endpointSlices"`
	Nodes          []corev1.Node               `json:"nodes"`
}

func zone(i int) string { return fmt.Sprintf("zone-%d", i%zones) }

func nodeIP(i int) netip.Addr  { return add(netip.MustParseAddr("172.16.0.10"), i) }
func podIP(i int) netip.Addr   { return add(netip.MustParseAddr("10.128.0.1"), i) }
func movedIP(i int) netip.Addr { return add(netip.MustParseAddr("100.64.0.1"), i) }

// add returns a + n for an IPv4 address.
func add(a netip.Addr, n int) netip.Addr {
	b := a.As4()
	v := uint32(b[0])<<24 | uint32(b[1])<<16 | uint32(b[2])<<8 | uint32(b[3])
	v += uint32(n)
	return netip.AddrFrom4([4]byte{byte(v >> 24), byte(v >> 16), byte(v >> 8), byte(v)})
}
