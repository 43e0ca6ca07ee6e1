package userspace

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/netip"
	"sync"
	"testing"
	"time"

	"github.com/switchyard-proxy/switchyard/dataplane"
	"github.com/switchyard-proxy/switchyard/dataplane/dataplanetest"
	switchyardv1 "github.com/switchyard-proxy/switchyard/proto/switchyard/v1"
)

// backend is a loopback TCP and UDP server on one port that answers with
// its name: TCP writes "name\n" then echoes, UDP replies "name".
type backend struct {
	name string
	addr netip.AddrPort
	tcp  net.Listener
	udp  net.PacketConn
}

func startBackend(t *testing.T, name string) *backend {
	t.Helper()
	for range 20 {
		ln, err := net.Listen("tcp4", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		ap := ln.Addr().(*net.TCPAddr).AddrPort()
		pc, err := net.ListenPacket("udp4", ap.String())
		if err != nil {
			ln.Close()
			continue // the UDP port is taken: try another
		}
		b := &backend{name: name, addr: ap, tcp: ln, udp: pc}
		var wg sync.WaitGroup
		wg.Go(func() { b.serveTCP(&wg) })
		wg.Go(b.serveUDP)
		t.Cleanup(func() { b.stop(); wg.Wait() })
		return b
	}
	t.Fatal("no free TCP+UDP port pair")
	return nil
}

func (b *backend) stop() {
	b.tcp.Close()
	b.udp.Close()
}

func (b *backend) serveTCP(wg *sync.WaitGroup) {
	var mu sync.Mutex
	var conns []net.Conn
	defer func() {
		mu.Lock()
		for _, c := range conns {
			c.Close()
		}
		mu.Unlock()
	}()
	for {
		c, err := b.tcp.Accept()
		if err != nil {
			return
		}
		mu.Lock()
		conns = append(conns, c)
		mu.Unlock()
		wg.Go(func() {
			defer c.Close()
			fmt.Fprintf(c, "%s\n", b.name)
			_, _ = io.Copy(c, c)
		})
	}
}

func (b *backend) serveUDP() {
	buf := make([]byte, 2048)
	for {
		n, from, err := b.udp.ReadFrom(buf)
		if err != nil {
			return
		}
		_, _ = b.udp.WriteTo([]byte(b.name+" "+string(buf[:n])), from)
	}
}

// deadPort returns a loopback address where nothing listens (TCP connects
// are refused, UDP datagrams draw ICMP port unreachable).
func deadPort(t *testing.T) netip.AddrPort {
	t.Helper()
	ln, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ap := ln.Addr().(*net.TCPAddr).AddrPort()
	ln.Close()
	return ap
}

// randomLoopback returns an address in 127.0.0.0/8 unlikely to be used by
// another test on this machine, so a fixed service port cannot collide.
func randomLoopback() netip.Addr {
	return netip.AddrFrom4([4]byte{127, byte(100 + rand.IntN(100)), byte(rand.IntN(256)), byte(1 + rand.IntN(254))})
}

// svcView builds a ClusterIP service with one port "p" served by eps.
func svcView(name string, ip netip.Addr, proto switchyardv1.Protocol, port uint32, eps ...netip.AddrPort) *switchyardv1.ServiceView {
	sv := &switchyardv1.ServiceView{
		Namespace: "default", Name: name, Type: switchyardv1.ServiceType_SERVICE_TYPE_CLUSTER_IP,
		ClusterIps:            []string{ip.String()},
		Ports:                 []*switchyardv1.ServicePort{{Name: "p", Protocol: proto, Port: port}},
		InternalTrafficPolicy: switchyardv1.TrafficPolicy_TRAFFIC_POLICY_CLUSTER,
		ExternalTrafficPolicy: switchyardv1.TrafficPolicy_TRAFFIC_POLICY_CLUSTER,
		HasAnyEndpoints:       len(eps) > 0,
	}
	for _, ep := range eps {
		sv.ClusterEndpoints = append(sv.ClusterEndpoints, &switchyardv1.Endpoint{
			Address: ep.Addr().String(), Ready: true, Serving: true,
			Ports: []*switchyardv1.EndpointPort{{Name: "p", Port: uint32(ep.Port())}},
		})
	}
	return sv
}

func stateOf(svcs ...*switchyardv1.ServiceView) *dataplane.State {
	return dataplanetest.NewState(&switchyardv1.NodeConfig{NodeName: "n"}, svcs...)
}

// newLoopbackDP returns a Dataplane whose frontends listen on local ports
// of 127.0.0.1, cleaned up (and checked to stop every goroutine) when the
// test ends.
func newLoopbackDP(t *testing.T, cfg Config) *Dataplane {
	t.Helper()
	if !cfg.LocalAddress.IsValid() {
		cfg.Bind, cfg.LocalAddress = BindLocalPort, netip.MustParseAddr("127.0.0.1")
	}
	cfg.Logger = dataplanetest.Logger(t)
	return newTestDP(t, cfg)
}

// newTestDP returns a Dataplane of cfg that is cleaned up when the test
// ends.
func newTestDP(t *testing.T, cfg Config) *Dataplane {
	t.Helper()
	d, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := d.Cleanup(ctx); err != nil {
			t.Errorf("Cleanup: %v", err)
		}
	})
	return d
}

func apply(t *testing.T, d *Dataplane, st *dataplane.State) {
	t.Helper()
	if err := d.Apply(t.Context(), st, dataplane.ApplyOptions{}); err != nil {
		t.Fatalf("Apply: %v", err)
	}
}

// boundOf returns where the frontend of service name listens.
func boundOf(t *testing.T, d *Dataplane, name string, proto dataplane.Protocol) netip.AddrPort {
	t.Helper()
	for _, l := range d.Listeners() {
		if l.Service == "default/"+name && l.Protocol == proto {
			return l.Bound
		}
	}
	t.Fatalf("no %s listener for %s in %+v", proto, name, d.Listeners())
	return netip.AddrPort{}
}

// session is an open proxied TCP connection and the backend that got it.
type session struct {
	conn    net.Conn
	r       *bufio.Reader
	backend string
}

// dialName connects to addr and reads the backend's name line.
func dialName(t *testing.T, addr netip.AddrPort) (*session, error) {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr.String(), 2*time.Second)
	if err != nil {
		return nil, err
	}
	_ = c.SetDeadline(time.Now().Add(3 * time.Second))
	r := bufio.NewReader(c)
	line, err := r.ReadString('\n')
	if err != nil {
		c.Close()
		return nil, err
	}
	return &session{conn: c, r: r, backend: line[:len(line)-1]}, nil
}

// echo sends msg on an open session and reads it back.
func (s *session) echo(msg string) error {
	if _, err := fmt.Fprintf(s.conn, "%s\n", msg); err != nil {
		return err
	}
	got, err := s.r.ReadString('\n')
	if err != nil {
		return err
	}
	if got != msg+"\n" {
		return fmt.Errorf("echo %q, want %q", got, msg)
	}
	return nil
}

// udpAsk sends one datagram from conn and returns the reply.
func udpAsk(conn *net.UDPConn, msg string, timeout time.Duration) (string, error) {
	_ = conn.SetDeadline(time.Now().Add(timeout))
	if _, err := conn.Write([]byte(msg)); err != nil {
		return "", err
	}
	buf := make([]byte, 2048)
	n, err := conn.Read(buf)
	if err != nil {
		return "", err
	}
	return string(buf[:n]), nil
}

// faultySockets wraps HostSockets and fails chosen operations.
type faultySockets struct {
	HostSockets
	mu         sync.Mutex
	failListen map[netip.AddrPort]int // remaining failures per frontend address
}

var errInjected = errors.New("injected failure")

func (f *faultySockets) ListenTCP(ctx context.Context, addr netip.AddrPort, freebind bool) (*net.TCPListener, error) {
	f.mu.Lock()
	n := f.failListen[addr]
	if n > 0 {
		f.failListen[addr] = n - 1
	}
	f.mu.Unlock()
	if n > 0 {
		return nil, errInjected
	}
	return f.HostSockets.ListenTCP(ctx, addr, freebind)
}
