package system_test

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/switchyard-proxy/switchyard/e2e/system"
	"github.com/switchyard-proxy/switchyard/e2e/testbed/echo"
	"github.com/switchyard-proxy/switchyard/e2e/testbed/netns"
	"github.com/switchyard-proxy/switchyard/e2e/testbed/probe"
	eps "github.com/switchyard-proxy/switchyard/e2e/testbed/slices"
)

// udpFlow is one connected UDP socket created inside a namespace: every
// exchange uses the same source port, hence the same conntrack entry.
type udpFlow struct{ conn net.Conn }

func (e *env) openFlow(t *testing.T, ns string, addr netip.AddrPort) *udpFlow {
	t.Helper()
	var conn net.Conn
	err := e.c.Topo.Do(ns, func() error {
		var err error
		conn, err = net.Dial("udp", addr.String())
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return &udpFlow{conn: conn}
}

// exchange sends one datagram and returns the name of the pod that
// answered. A late reply to an earlier timed-out exchange is read first
// and skipped by draining before sending.
func (f *udpFlow) exchange() (string, error) {
	buf := make([]byte, 2048)
	_ = f.conn.SetReadDeadline(time.Now())
	for {
		if _, err := f.conn.Read(buf); err != nil {
			break
		}
	}
	if err := f.conn.SetDeadline(time.Now().Add(300 * time.Millisecond)); err != nil {
		return "", err
	}
	if _, err := f.conn.Write([]byte("flow")); err != nil {
		return "", err
	}
	n, err := f.conn.Read(buf)
	if err != nil {
		return "", err
	}
	name, _, err := echo.ParseReply(buf[:n])
	return name, err
}

// testUDPFlow: long-lived UDP flows (one socket each, from each node and
// the client) stay on their endpoint when another one is added, and move
// to the remaining endpoint when theirs leaves the slice, although the old
// pod still answers: the agent deleted the flows' conntrack entries.
func testUDPFlow(t *testing.T, e *env) {
	s := e.createService(t, "sc-udp", corev1.ServiceSpec{ClusterIP: "10.96.1.8",
		Ports: []corev1.ServicePort{{Name: "dns", Protocol: corev1.ProtocolUDP, Port: 53}},
	}, eps.UDP("dns", system.TargetPort))
	first, second := e.pod(0), e.pod(1)
	if err := e.write(t.Context(), s, e.endpoints(first)...); err != nil {
		t.Fatal(err)
	}
	// Flows start once the endpoint is programmed: a datagram sent before
	// leaves an un-NATed conntrack entry that only cleanup on the Service's
	// first endpoint removes (see the report on new UDP Services).
	for _, src := range sources(e.c) {
		waitFor(t.Context(), t, src.name+" reaches "+first.Name+" over UDP", func() (bool, string) {
			res, err := probe.New(e.c.Topo, src.ns).UDP(t.Context(), s.vip(0), probe.Options{})
			return err == nil && answeredBy(res, first.Name), fmt.Sprint(res, err)
		})
	}
	// Programmed is not finished: after the rules, the agent deletes the
	// port's conntrack entries (its first endpoint made it active) and only
	// then ACKs. A flow opened before that would lose its entry and pick an
	// endpoint anew on its next datagram, so wait for the ACKs.
	e.settled(t, "udp-first-endpoint")
	flows := map[string]*udpFlow{}
	for _, src := range sources(e.c) {
		flows[src.name] = e.openFlow(t, src.ns, s.vip(0))
	}
	answers := func(f *udpFlow, want string) (bool, string) {
		got, err := f.exchange()
		return err == nil && got == want, fmt.Sprintf("answer %q, err %v", got, err)
	}
	for name, f := range flows {
		waitFor(t.Context(), t, name+"'s flow reaches "+first.Name, func() (bool, string) { return answers(f, first.Name) })
	}
	if err := e.write(t.Context(), s, e.endpoints(first, second)...); err != nil {
		t.Fatal(err)
	}
	e.settled(t, "udp-second-endpoint")
	for name, f := range flows {
		for range 5 {
			if ok, last := answers(f, first.Name); !ok {
				t.Errorf("%s's established flow left %s when an endpoint was added: %s", name, first.Name, last)
			}
		}
	}
	e.measure(t, change{
		scenario: "udp-endpoint-gone",
		write:    func(ctx context.Context) error { return e.write(ctx, s, e.endpoints(second)...) },
		reached: func(_ context.Context, n netns.Node) (bool, string) {
			return answers(flows[n.Name], second.Name)
		},
	})
	if ok, last := answers(flows["client"], second.Name); !ok {
		t.Errorf("the client's flow did not move to %s: %s", second.Name, last)
	}
}

// testUDPFlowBeforeService: a UDP client that starts sending to a cluster
// IP before its Service is programmed (a DNS client retrying, say) leaves
// an un-NATed conntrack entry. kube-proxy deletes entries to the cluster IP
// of every UDP port that becomes active, a new one included
// (NewlyActiveUDPServices), and so does conntrack.Stale, so the flow
// reaches the endpoint. The slice is written first here so that the agent
// sees the port only with its endpoint, every time.
func testUDPFlowBeforeService(t *testing.T, e *env) {
	const ns = "sc-udp-early"
	ctx := t.Context()
	cs := e.c.API.Client()
	if _, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	vip := netip.MustParseAddrPort("10.96.1.11:53")
	var flows []*udpFlow
	for _, n := range e.c.Topo.Nodes() {
		f := e.openFlow(t, n.NS, vip)
		if _, err := f.exchange(); err == nil {
			t.Fatalf("%s: %s answered before it exists", n.Name, vip)
		}
		flows = append(flows, f)
	}
	// The Service does not exist yet: its UID in the owner reference is a
	// placeholder (no garbage collector runs here).
	placeholder := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: svcName, UID: "00000000-0000-0000-0000-000000000000"},
		Spec: corev1.ServiceSpec{ClusterIP: vip.Addr().String()}} // not headless: no headless label on the slice
	slice, err := eps.Build(placeholder, eps.Slice{Namespace: ns, Service: svcName, Suffix: "a",
		Ports: []eps.Port{eps.UDP("dns", system.TargetPort)}, Endpoints: e.endpoints(e.pod(0))}, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cs.DiscoveryV1().EndpointSlices(ns).Create(ctx, slice, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := cs.CoreV1().Services(ns).Create(ctx, &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: svcName},
		Spec: corev1.ServiceSpec{ClusterIP: vip.Addr().String(),
			Ports: []corev1.ServicePort{{Name: "dns", Protocol: corev1.ProtocolUDP, Port: int32(vip.Port())}}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	for _, n := range e.c.Topo.Nodes() {
		waitFor(ctx, t, n.Name+" reaches pod-0 on a new socket", func() (bool, string) {
			res, err := probe.New(e.c.Topo, n.NS).UDP(ctx, vip, probe.Options{})
			return err == nil && answeredBy(res, e.pod(0).Name), fmt.Sprint(res, err)
		})
	}
	e.settled(t, "udp-early-programmed") // the ACK follows the conntrack cleanup
	for i, n := range e.c.Topo.Nodes() {
		waitFor(ctx, t, n.Name+"'s flow started before the Service reaches pod-0", func() (bool, string) {
			got, err := flows[i].exchange()
			return err == nil && got == e.pod(0).Name, fmt.Sprintf("answer %q, err %v", got, err)
		})
	}
}
