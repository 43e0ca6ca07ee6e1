package dptest

import (
	"net"
	"net/netip"
	"strings"
	"testing"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/switchyard-proxy/switchyard/dataplane"
	"github.com/switchyard-proxy/switchyard/e2e/testbed/echo"
	"github.com/switchyard-proxy/switchyard/e2e/testbed/netns"
	switchyardv1 "github.com/switchyard-proxy/switchyard/proto/switchyard/v1"
)

// Bed is a kernel mode's test bed: a node namespace with three pods
// running echo servers (TCP and UDP on TargetPort, both families,
// reporting the client's address) and a client namespace, built by
// e2e/testbed and torn down when the test ends. Runner runs the mode's
// commands in the node namespace. A mode's bed embeds it and adds its
// Dataplane.
type Bed struct {
	Topo   *netns.Topology
	Node   netns.Node
	Pods   []netns.Pod
	Runner *Runner
	// Family is the family the bed's family checks (families.go)
	// address: IPv4 on an IPv4-only bed, IPv6 on a dual-stack one.
	Family dataplane.Family
}

// NewBed builds an IPv4-only Bed whose Runner works as o says.
func NewBed(t *testing.T, o RunnerOptions) *Bed {
	t.Helper()
	return newBed(t, dataplane.IPv4, o)
}

// NewBedFor builds the bed a test of family f runs on: NewBed's for
// IPv4; for IPv6 a dual-stack one (every namespace has both families,
// as a dual-stack cluster's nodes and pods do), whose checks address
// IPv6. A mode programs both families there (DualStack).
func NewBedFor(t *testing.T, f dataplane.Family, o RunnerOptions) *Bed {
	t.Helper()
	return newBed(t, f, o)
}

func newBed(t *testing.T, f dataplane.Family, o RunnerOptions) *Bed {
	t.Helper()
	topo := netns.New(t, netns.Spec{Nodes: 1, Pods: 3, DualStack: f == dataplane.IPv6})
	if _, err := echo.StartPods(t.Context(), echo.Launcher{Topo: topo}, topo.Pods(),
		echo.Config{TCP: ":8080", UDP: ":8080", ReportClient: true}); err != nil {
		t.Fatalf("echo servers: %v", err)
	}
	node := topo.Node(0)
	return &Bed{Topo: topo, Node: node, Pods: topo.Pods(), Runner: NewRunner(topo, node.NS, o), Family: f}
}

// DualStack reports whether the bed's namespaces carry IPv6 too: a mode
// must then program both families.
func (b *Bed) DualStack() bool { return b.Topo.Plan().DualStack() }

// NetfilterHandle opens a netlink handle for netfilter (conntrack) inside
// the node namespace; it closes when the test ends.
func (b *Bed) NetfilterHandle(t *testing.T) *netlink.Handle {
	t.Helper()
	var h *netlink.Handle
	if err := b.Topo.Do(b.Node.NS, func() error {
		var err error
		h, err = netlink.NewHandle(unix.NETLINK_NETFILTER)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(h.Close)
	return h
}

// CheckUDPFlowAfterRemoval programs a UDP cluster IP service on vip over
// the bed's pods with apply, holds one UDP flow to it from the client,
// then removes the endpoint the flow reached. With cleanup (the
// dataplane deletes stale conntrack entries) the flow must move to
// another endpoint; without, it must stay on the removed one, which
// shows the test can see the difference.
func (b *Bed) CheckUDPFlowAfterRemoval(t *testing.T, vip netip.AddrPort, apply func(*testing.T, *dataplane.State), cleanup bool) {
	t.Helper()
	svc := func(pods ...netns.Pod) *switchyardv1.ServiceView { return udpService(vip, pods...) }
	apply(t, State(b.Node, svc(b.Pods...)))

	conn := b.clientUDP(t, vip)
	first := Exchange(t, conn)
	for range 5 {
		if got := Exchange(t, conn); got != first {
			t.Fatalf("one UDP flow reached %s then %s", first, got)
		}
	}
	var rest []netns.Pod
	for _, p := range b.Pods {
		if !strings.EqualFold(p.Name, first) {
			rest = append(rest, p)
		}
	}
	if len(rest) != 2 {
		t.Fatalf("backend %q is not one of the pods", first)
	}
	apply(t, State(b.Node, svc(rest...)))
	got := Exchange(t, conn)
	switch {
	case cleanup && got == first:
		t.Fatalf("flow still reaches removed endpoint %s: conntrack entry not cleared", first)
	case !cleanup && got != first:
		t.Fatalf("without cleanup the flow moved from %s to %s: the test cannot tell", first, got)
	}
}

// CheckUDPFlowAfterTargetPortChange holds one UDP flow from the client to
// a cluster IP service on vip over one pod, then moves the service's
// target port (the pod keeps its address) and reads the node's conntrack
// table: with cleanup no entry DNATed to the old pod:port may remain;
// without, it must (the control). Upstream's e2e "should be able to
// cleanup conntrack entries when UDP service target port changes for a
// NodePort service" fails when it stays: the client keeps reaching the
// old port.
func (b *Bed) CheckUDPFlowAfterTargetPortChange(t *testing.T, vip netip.AddrPort, apply func(*testing.T, *dataplane.State), cleanup bool) {
	t.Helper()
	pod := b.Pods[0]
	svc := func(target uint32) *switchyardv1.ServiceView {
		sv := udpService(vip, pod)
		sv.ClusterEndpoints[0].Ports[0].Port = target
		return sv
	}
	apply(t, State(b.Node, svc(TargetPort)))
	conn := b.clientUDP(t, vip)
	Exchange(t, conn)
	old := netip.AddrPortFrom(PodIP(pod, FamilyOf(vip.Addr())), TargetPort)
	h := b.NetfilterHandle(t)
	if n := b.udpEntries(t, h, vip, old); n != 1 {
		t.Fatalf("%d conntrack entries %v -> %v before the change, want 1", n, vip, old)
	}
	apply(t, State(b.Node, svc(TargetPort+1)))
	switch n := b.udpEntries(t, h, vip, old); {
	case cleanup && n != 0:
		t.Fatalf("%d conntrack entries still DNAT %v to the old target %v", n, vip, old)
	case !cleanup && n == 0:
		t.Fatalf("without cleanup the entry to %v went: the test cannot tell", old)
	}
}

// udpEntries counts the node's UDP conntrack entries from vip's clients
// DNATed to ep.
func (b *Bed) udpEntries(t *testing.T, h *netlink.Handle, vip, ep netip.AddrPort) int {
	t.Helper()
	inet := netlink.InetFamily(unix.AF_INET)
	if vip.Addr().Is6() {
		inet = unix.AF_INET6
	}
	flows, err := h.ConntrackTableList(netlink.ConntrackTable, inet)
	if err != nil {
		t.Fatalf("conntrack list: %v", err)
	}
	n := 0
	for _, f := range flows {
		dst, _ := netip.AddrFromSlice(f.Forward.DstIP)
		src, _ := netip.AddrFromSlice(f.Reverse.SrcIP)
		if f.Forward.Protocol == unix.IPPROTO_UDP && netip.AddrPortFrom(dst.Unmap(), f.Forward.DstPort) == vip &&
			netip.AddrPortFrom(src.Unmap(), f.Reverse.SrcPort) == ep {
			n++
		}
	}
	return n
}

// udpService is the UDP cluster IP service "dns" on vip over pods.
func udpService(vip netip.AddrPort, pods ...netns.Pod) *switchyardv1.ServiceView {
	sv := Service("dns", vip.Addr().String(), uint32(vip.Port()), 0, pods...)
	sv.Type = switchyardv1.ServiceType_SERVICE_TYPE_CLUSTER_IP
	sv.Ports[0].Protocol = switchyardv1.Protocol_PROTOCOL_UDP
	return sv
}

// clientUDP is a UDP socket in the client namespace connected to vip,
// closed when the test ends.
func (b *Bed) clientUDP(t *testing.T, vip netip.AddrPort) *net.UDPConn {
	t.Helper()
	var conn *net.UDPConn
	if err := b.Topo.Do(b.Topo.Client().NS, func() error {
		var err error
		conn, err = net.DialUDP("udp", nil, net.UDPAddrFromAddrPort(vip))
		return err
	}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return conn
}
