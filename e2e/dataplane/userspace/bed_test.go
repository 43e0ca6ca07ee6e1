package userspace

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"os"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/switchyard-proxy/switchyard/dataplane"
	"github.com/switchyard-proxy/switchyard/dataplane/userspace"
	"github.com/switchyard-proxy/switchyard/e2e/testbed/echo"
	"github.com/switchyard-proxy/switchyard/e2e/testbed/netns"
	switchyardv1 "github.com/switchyard-proxy/switchyard/proto/switchyard/v1"
)

func TestMain(m *testing.M) {
	if code, ok := echo.RunChild(); ok {
		os.Exit(code)
	}
	goleak.VerifyTestMain(m)
}

// nsSockets opens the proxy's sockets inside one namespace. Workers sit in
// long-lived Topology.Do calls (each on a thread inside the namespace) and
// run socket operations handed to them, so a dial costs a channel hand-off
// rather than two setns calls: the proxy's latency is measured, not the
// test harness's. Sockets keep their namespace when used from any thread.
type nsSockets struct {
	reqs chan func()
}

var _ userspace.Sockets = (*nsSockets)(nil)

// newNSSockets starts workers in ns; they stop when the test ends.
func newNSSockets(t testing.TB, topo *netns.Topology, ns string, workers int) *nsSockets {
	s := &nsSockets{reqs: make(chan func())}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			err := topo.Do(ns, func() error {
				for {
					select {
					case <-ctx.Done():
						return nil
					case f := <-s.reqs:
						f()
					}
				}
			})
			if err != nil {
				t.Errorf("socket worker in %s: %v", ns, err)
			}
		})
	}
	t.Cleanup(func() { cancel(); wg.Wait() })
	return s
}

// do runs f on a worker inside the namespace and waits for it.
func (s *nsSockets) do(ctx context.Context, f func()) error {
	done := make(chan struct{})
	select {
	case s.reqs <- func() { defer close(done); f() }:
	case <-ctx.Done():
		return ctx.Err()
	}
	<-done
	return nil
}

func (s *nsSockets) ListenTCP(ctx context.Context, addr netip.AddrPort, freebind bool) (ln *net.TCPListener, err error) {
	if derr := s.do(ctx, func() { ln, err = userspace.HostSockets{}.ListenTCP(ctx, addr, freebind) }); derr != nil {
		return nil, derr
	}
	return ln, err
}

func (s *nsSockets) ListenUDP(ctx context.Context, addr netip.AddrPort, freebind bool) (c *net.UDPConn, err error) {
	if derr := s.do(ctx, func() { c, err = userspace.HostSockets{}.ListenUDP(ctx, addr, freebind) }); derr != nil {
		return nil, derr
	}
	return c, err
}

func (s *nsSockets) DialTCP(ctx context.Context, dst netip.AddrPort) (c *net.TCPConn, err error) {
	if derr := s.do(ctx, func() { c, err = userspace.HostSockets{}.DialTCP(ctx, dst) }); derr != nil {
		return nil, derr
	}
	return c, err
}

func (s *nsSockets) DialUDP(ctx context.Context, dst netip.AddrPort) (c *net.UDPConn, err error) {
	if derr := s.do(ctx, func() { c, err = userspace.HostSockets{}.DialUDP(ctx, dst) }); derr != nil {
		return nil, derr
	}
	return c, err
}

// fakeClock drives session affinity in tests.
type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

type bed struct {
	topo  *netns.Topology
	node  netns.Node
	pods  []netns.Pod
	echos []*echo.Instance
	dp    *userspace.Dataplane
	clock *fakeClock
}

// bedOptions tune newBed.
type bedOptions struct {
	pods int
	cfg  userspace.Config
	// noLocalRoute leaves the service CIDR un-routed to the node itself
	// (for the REDIRECT test).
	noLocalRoute bool
}

func newBed(t testing.TB, o bedOptions) *bed {
	t.Helper()
	if o.pods == 0 {
		o.pods = 3
	}
	topo := netns.New(t, netns.Spec{Nodes: 1, Pods: o.pods})
	echos, err := echo.StartPods(t.Context(), echo.Launcher{Topo: topo}, topo.Pods(),
		echo.Config{TCP: ":8080", UDP: ":8080", Mode: echo.ModeEcho, ReportClient: true})
	if err != nil {
		t.Fatalf("echo servers: %v", err)
	}
	node := topo.Node(0)
	if !o.noLocalRoute {
		// AnyIP: every service address is local on the node, so the proxy
		// binds it and the kernel delivers to it, with no netfilter.
		if _, err := topo.Exec(t.Context(), node.NS, "ip", "route", "add", "local",
			topo.Plan().ServiceCIDR.String(), "dev", "lo"); err != nil {
			t.Fatal(err)
		}
	}
	b := &bed{topo: topo, node: node, pods: topo.Pods(), echos: echos, clock: &fakeClock{t: time.Unix(1e9, 0)}}
	cfg := o.cfg
	cfg.Sockets = newNSSockets(t, topo, node.NS, 8)
	cfg.Logger = netns.TestLogger(t)
	cfg.Now = b.clock.Now
	if b.dp, err = userspace.New(cfg); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := b.dp.Cleanup(ctx); err != nil {
			t.Errorf("Cleanup: %v", err)
		}
	})
	return b
}

// svc is a NodePort service on vip:port (node port np, 0 for none)
// served by pods on 8080, TCP or UDP.
func (b *bed) svc(name string, vip netip.AddrPort, np uint32, proto switchyardv1.Protocol, pods ...netns.Pod) *switchyardv1.ServiceView {
	sv := &switchyardv1.ServiceView{
		Namespace: "default", Name: name, Type: switchyardv1.ServiceType_SERVICE_TYPE_NODE_PORT,
		ClusterIps:            []string{vip.Addr().String()},
		Ports:                 []*switchyardv1.ServicePort{{Name: "p", Protocol: proto, Port: uint32(vip.Port()), NodePort: np}},
		ExternalTrafficPolicy: switchyardv1.TrafficPolicy_TRAFFIC_POLICY_CLUSTER,
		InternalTrafficPolicy: switchyardv1.TrafficPolicy_TRAFFIC_POLICY_CLUSTER,
		HasAnyEndpoints:       len(pods) > 0,
	}
	for _, p := range pods {
		sv.ClusterEndpoints = append(sv.ClusterEndpoints, podEndpoint(p))
	}
	return sv
}

func podEndpoint(p netns.Pod) *switchyardv1.Endpoint {
	return &switchyardv1.Endpoint{Address: p.IP.String(), Ready: true, Serving: true, IsLocal: true,
		Ports: []*switchyardv1.EndpointPort{{Name: "p", Port: 8080}}}
}

func (b *bed) state(svcs ...*switchyardv1.ServiceView) *dataplane.State {
	st := &dataplane.State{
		Config:   &switchyardv1.NodeConfig{NodeName: b.node.Name, NodeIps: []string{b.node.IP.String()}},
		Services: map[string]*switchyardv1.ServiceView{},
	}
	for _, sv := range svcs {
		st.Services[sv.Namespace+"/"+sv.Name] = sv
	}
	return st
}

func (b *bed) apply(t testing.TB, st *dataplane.State) {
	t.Helper()
	if err := b.dp.Apply(t.Context(), st, dataplane.ApplyOptions{}); err != nil {
		t.Fatalf("Apply: %v", err)
	}
}

// shares returns n/len(pods) per pod name: exact round robin.
func shares(n int, pods ...netns.Pod) map[string]int {
	out := map[string]int{}
	for _, p := range pods {
		out[p.Name] += n / len(pods)
	}
	return out
}

// dial opens a TCP connection from namespace ns.
func (b *bed) dial(ctx context.Context, ns string, addr netip.AddrPort) (net.Conn, error) {
	var c net.Conn
	var derr error
	err := b.topo.Do(ns, func() error {
		var d net.Dialer
		c, derr = d.DialContext(ctx, "tcp", addr.String())
		return nil
	})
	if err != nil {
		return nil, err
	}
	if derr != nil {
		return nil, fmt.Errorf("dial %s from %s: %w", addr, ns, derr)
	}
	return c, nil
}
