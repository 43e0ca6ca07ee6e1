package userspace

import (
	"context"
	"errors"
	"net"
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/switchyard-proxy/switchyard/dataplane"
	"github.com/switchyard-proxy/switchyard/dataplane/dataplanetest"
	switchyardv1 "github.com/switchyard-proxy/switchyard/proto/switchyard/v1"
)

const (
	protoTCP = switchyardv1.Protocol_PROTOCOL_TCP
	protoUDP = switchyardv1.Protocol_PROTOCOL_UDP
)

var vip = netip.MustParseAddr("10.96.0.10")

func TestNewValidates(t *testing.T) {
	for _, tc := range []struct {
		name string
		cfg  Config
		want string
	}{
		{"local port without address", Config{Bind: BindLocalPort}, "needs LocalAddress"},
		{"unknown bind", Config{Bind: 7}, "unknown bind"},
		{"negative timeout", Config{DialTimeout: -1}, "negative"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := New(tc.cfg); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("New(%+v) = %v, want error containing %q", tc.cfg, err, tc.want)
			}
		})
	}
}

// named is a backend address and its name; "" for a dead one.
type named struct {
	addr netip.AddrPort
	name string
}

// wantShares is the exact result of round robin with retry: backends are
// rotated in address order and a dead backend's turn goes to the next
// live one in that order.
func wantShares(bs []named, conns int) map[string]int {
	slices.SortFunc(bs, func(x, y named) int { return x.addr.Compare(y.addr) })
	want := map[string]int{}
	for i := range bs {
		for j := range bs {
			if b := bs[(i+j)%len(bs)]; b.name != "" {
				want[b.name] += conns / len(bs)
				break
			}
		}
	}
	return want
}

// TestTCPRoundRobinAndRetry proxies real loopback connections: exact round
// robin over live backends, and a refused backend skipped for the next
// one without the client noticing.
func TestTCPRoundRobinAndRetry(t *testing.T) {
	for _, tc := range []struct {
		name  string
		names []string // "" is a refusing backend
	}{
		{"three live backends", []string{"a", "b", "c"}},
		{"one refusing backend", []string{"a", "", "c"}},
		{"two refusing backends", []string{"a", "", ""}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var bs []named
			var eps []netip.AddrPort
			for _, n := range tc.names {
				b := named{name: n}
				if n == "" {
					b.addr = deadPort(t)
				} else {
					b.addr = startBackend(t, n).addr
				}
				bs = append(bs, b)
				eps = append(eps, b.addr)
			}
			d := newLoopbackDP(t, Config{})
			apply(t, d, stateOf(svcView("web", vip, protoTCP, 80, eps...)))
			front := boundOf(t, d, "web", dataplane.TCP)
			const conns = 30
			got := map[string]int{}
			for range conns {
				s, err := dialName(t, front)
				if err != nil {
					t.Fatalf("connection failed: %v", err)
				}
				got[s.backend]++
				s.conn.Close()
			}
			if diff := cmp.Diff(wantShares(bs, conns), got); diff != "" {
				t.Errorf("shares (-want +got):\n%s", diff)
			}
		})
	}
}

func TestTCPAllBackendsDeadResetsClient(t *testing.T) {
	d := newLoopbackDP(t, Config{})
	apply(t, d, stateOf(svcView("web", vip, protoTCP, 80, deadPort(t), deadPort(t))))
	_, err := dialName(t, boundOf(t, d, "web", dataplane.TCP))
	if err == nil {
		t.Fatal("connection through two dead backends got an answer")
	}
	t.Logf("client saw: %v", err)
}

func TestTCPAffinity(t *testing.T) {
	a, b, c := startBackend(t, "a"), startBackend(t, "b"), startBackend(t, "c")
	d := newLoopbackDP(t, Config{})
	sv := svcView("sticky", vip, protoTCP, 80, a.addr, b.addr, c.addr)
	sv.SessionAffinity = switchyardv1.SessionAffinity_SESSION_AFFINITY_CLIENT_IP
	sv.SessionAffinityTimeoutSeconds = 60
	apply(t, d, stateOf(sv))
	got := map[string]int{}
	for range 20 {
		s, err := dialName(t, boundOf(t, d, "sticky", dataplane.TCP))
		if err != nil {
			t.Fatal(err)
		}
		got[s.backend]++
		s.conn.Close()
	}
	if len(got) != 1 {
		t.Errorf("one client reached %v, want a single backend", got)
	}
}

// TestUpdateKeepsEstablishedClosesRemoved checks the in-place update: the
// listener stays, a connection to a remaining backend keeps working, one
// to a removed backend is closed, and new connections use the new list.
func TestUpdateKeepsEstablishedClosesRemoved(t *testing.T) {
	a, b, c := startBackend(t, "a"), startBackend(t, "b"), startBackend(t, "c")
	d := newLoopbackDP(t, Config{})
	apply(t, d, stateOf(svcView("web", vip, protoTCP, 80, a.addr, b.addr)))
	front := boundOf(t, d, "web", dataplane.TCP)
	sessions := map[string]*session{}
	for range 2 {
		s, err := dialName(t, front)
		if err != nil {
			t.Fatal(err)
		}
		sessions[s.backend] = s
		defer s.conn.Close()
	}
	apply(t, d, stateOf(svcView("web", vip, protoTCP, 80, a.addr, c.addr)))
	if got := boundOf(t, d, "web", dataplane.TCP); got != front {
		t.Fatalf("listener moved from %s to %s on update", front, got)
	}
	if err := sessions["a"].echo("still there"); err != nil {
		t.Errorf("connection to remaining backend a broke: %v", err)
	}
	if err := sessions["b"].echo("gone"); err == nil {
		t.Errorf("connection to removed backend b still works")
	}
	got := map[string]int{}
	for range 4 {
		s, err := dialName(t, front)
		if err != nil {
			t.Fatal(err)
		}
		got[s.backend]++
		s.conn.Close()
	}
	if diff := cmp.Diff(map[string]int{"a": 2, "c": 2}, got); diff != "" {
		t.Errorf("after update (-want +got):\n%s", diff)
	}
}

func TestUDPSessions(t *testing.T) {
	a, b := startBackend(t, "a"), startBackend(t, "b")
	d := newLoopbackDP(t, Config{UDPIdleTimeout: 300 * time.Millisecond})
	apply(t, d, stateOf(svcView("dns", vip, protoUDP, 53, a.addr, b.addr)))
	front := boundOf(t, d, "dns", dataplane.UDP)
	var clients []*net.UDPConn
	for range 2 {
		c, err := net.DialUDP("udp4", nil, net.UDPAddrFromAddrPort(front))
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		clients = append(clients, c)
	}
	// Each client is one session: all its datagrams reach one backend;
	// the two clients were placed round robin.
	got := map[string]int{}
	for i, c := range clients {
		for j := range 5 {
			reply, err := udpAsk(c, "q", time.Second)
			if err != nil {
				t.Fatalf("client %d datagram %d: %v", i, j, err)
			}
			got[strings.Fields(reply)[0]+"/"+string(rune('0'+i))]++
		}
	}
	if len(got) != 2 || got["a/0"]+got["b/0"] != 5 || got["a/1"]+got["b/1"] != 5 || got["a/0"] == got["a/1"] {
		t.Errorf("want each client pinned to its own backend, got %v", got)
	}
	if n := d.Listeners()[0].Active; n != 2 {
		t.Errorf("%d sessions, want 2", n)
	}
	dataplanetest.Eventually(t, 5*time.Second, "idle sessions to end", func() bool { return d.Listeners()[0].Active == 0 })
}

// TestUDPRetryOnRefusedBackend: the first backend in rotation answers
// with ICMP port unreachable; the session moves to the next backend and
// resends the datagram, so the client gets an answer.
func TestUDPRetryOnRefusedBackend(t *testing.T) {
	a := startBackend(t, "a")
	dead := deadPort(t)
	for dead.Compare(a.addr) > 0 {
		dead = deadPort(t)
	}
	d := newLoopbackDP(t, Config{})
	apply(t, d, stateOf(svcView("dns", vip, protoUDP, 53, dead, a.addr)))
	c, err := net.DialUDP("udp4", nil, net.UDPAddrFromAddrPort(boundOf(t, d, "dns", dataplane.UDP)))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	reply, err := udpAsk(c, "q", 2*time.Second)
	if err != nil || !strings.HasPrefix(reply, "a ") {
		t.Fatalf("reply %q, %v; want one from a after the dead backend refused", reply, err)
	}
}

// TestServiceAddressBinding covers where sockets listen: the service
// address itself (a loopback address here, which is local), a non-local
// address with IP_FREEBIND, and the local-port fallback without it.
func TestServiceAddressBinding(t *testing.T) {
	a := startBackend(t, "a")
	nonLocal := netip.MustParseAddr("192.0.2.77") // TEST-NET-1, not on this host
	for _, tc := range []struct {
		name       string
		cfg        Config
		ip         netip.Addr
		wantBound  func(front netip.AddrPort, bound netip.AddrPort) bool
		wantRules  bool
		dialBound  bool
		wantErrSub string
	}{
		{name: "local address", ip: randomLoopback(), dialBound: true,
			wantBound: func(f, b netip.AddrPort) bool { return f == b }},
		{name: "non-local with freebind", ip: nonLocal,
			wantBound: func(f, b netip.AddrPort) bool { return f == b }},
		{name: "non-local without freebind falls back", ip: nonLocal, dialBound: true, wantRules: true,
			cfg:       Config{NoFreebind: true, LocalAddress: netip.MustParseAddr("127.0.0.1")},
			wantBound: func(f, b netip.AddrPort) bool { return b.Addr() == netip.MustParseAddr("127.0.0.1") }},
		{name: "non-local without freebind or fallback fails", ip: nonLocal,
			cfg: Config{NoFreebind: true}, wantErrSub: "cannot assign requested address"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.cfg.Logger = dataplanetest.Logger(t)
			d, err := New(tc.cfg)
			if err != nil {
				t.Fatal(err)
			}
			defer d.Cleanup(context.Background())
			err = d.Apply(t.Context(), stateOf(svcView("web", tc.ip, protoTCP, 8080, a.addr)), dataplane.ApplyOptions{})
			if tc.wantErrSub != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErrSub) {
					t.Fatalf("Apply = %v, want error containing %q", err, tc.wantErrSub)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			l := d.Listeners()[0]
			if !tc.wantBound(l.Frontend, l.Bound) {
				t.Errorf("frontend %s bound at %s", l.Frontend, l.Bound)
			}
			if got := len(l.RedirectRules()) > 0; got != tc.wantRules {
				t.Errorf("redirect rules %q, want some: %v", l.RedirectRules(), tc.wantRules)
			}
			if tc.dialBound {
				s, err := dialName(t, l.Bound)
				if err != nil || s.backend != "a" {
					t.Fatalf("through %s: %v", l.Bound, err)
				}
				s.conn.Close()
			}
		})
	}
}

func TestRedirectRules(t *testing.T) {
	for _, tc := range []struct {
		l    Listener
		want []string
	}{
		{Listener{Protocol: dataplane.TCP, Frontend: netip.MustParseAddrPort("10.96.0.10:80"), Bound: netip.MustParseAddrPort("10.96.0.10:80")}, nil},
		{Listener{Protocol: dataplane.TCP, Frontend: netip.MustParseAddrPort("10.96.0.10:80"), Bound: netip.MustParseAddrPort("0.0.0.0:41000")}, []string{
			"-t nat -A PREROUTING -p tcp -d 10.96.0.10 --dport 80 -j REDIRECT --to-ports 41000",
			"-t nat -A OUTPUT -p tcp -d 10.96.0.10 --dport 80 -j REDIRECT --to-ports 41000",
		}},
		{Listener{Protocol: dataplane.UDP, Frontend: netip.MustParseAddrPort("[fd00::a]:53"), Bound: netip.MustParseAddrPort("[fd00::1]:41001")}, []string{
			"-t nat -A PREROUTING -p udp -d fd00::a --dport 53 -j DNAT --to-destination [fd00::1]:41001",
			"-t nat -A OUTPUT -p udp -d fd00::a --dport 53 -j DNAT --to-destination [fd00::1]:41001",
		}},
	} {
		if diff := cmp.Diff(tc.want, tc.l.RedirectRules()); diff != "" {
			t.Errorf("%s → %s (-want +got):\n%s", tc.l.Frontend, tc.l.Bound, diff)
		}
	}
}

// TestNoEndpointsNoListener: a service without endpoints gets no socket,
// so the kernel refuses at once; endpoints coming back reopen it.
func TestNoEndpointsNoListener(t *testing.T) {
	a := startBackend(t, "a")
	ip := randomLoopback()
	d, err := New(Config{Logger: dataplanetest.Logger(t)})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Cleanup(context.Background())
	front := netip.AddrPortFrom(ip, 8080)
	steps := []struct {
		eps     []netip.AddrPort
		wantErr bool
	}{{nil, true}, {[]netip.AddrPort{a.addr}, false}, {nil, true}}
	for i, s := range steps {
		apply(t, d, stateOf(svcView("web", ip, protoTCP, 8080, s.eps...)))
		_, err := dialName(t, front)
		if (err != nil) != s.wantErr {
			t.Errorf("step %d: dial = %v, want error %v", i, err, s.wantErr)
		}
		if s.wantErr && !isRefused(err) {
			t.Errorf("step %d: %v, want connection refused", i, err)
		}
	}
}

// TestListenFailureReportedAndRetried: one frontend failing to listen
// fails Apply for that frontend only; the next Apply opens it.
func TestListenFailureReportedAndRetried(t *testing.T) {
	a := startBackend(t, "a")
	ipBad, ipGood := randomLoopback(), randomLoopback()
	socks := &faultySockets{failListen: map[netip.AddrPort]int{netip.AddrPortFrom(ipBad, 8080): 1}}
	d, err := New(Config{Sockets: socks, Logger: dataplanetest.Logger(t)})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Cleanup(context.Background())
	st := stateOf(svcView("bad", ipBad, protoTCP, 8080, a.addr), svcView("good", ipGood, protoTCP, 8080, a.addr))
	err = d.Apply(t.Context(), st, dataplane.ApplyOptions{})
	if !errors.Is(err, errInjected) || !strings.Contains(err.Error(), "default/bad") {
		t.Fatalf("Apply = %v, want the injected failure naming default/bad", err)
	}
	if got := len(d.Listeners()); got != 1 {
		t.Fatalf("%d listeners after a partial failure, want the good one", got)
	}
	apply(t, d, st)
	for _, ip := range []netip.Addr{ipBad, ipGood} {
		s, err := dialName(t, netip.AddrPortFrom(ip, 8080))
		if err != nil {
			t.Fatalf("%s: %v", ip, err)
		}
		s.conn.Close()
	}
}

// TestAddressHeldByAnotherSocket: a frontend whose address and port a
// socket outside the mode already listens on (a host-network server on the
// service's port) is left out without failing Apply, the other frontends
// are served, and it is opened once the port is free.
func TestAddressHeldByAnotherSocket(t *testing.T) {
	a := startBackend(t, "a")
	ipHeld, ipGood := randomLoopback(), randomLoopback()
	holder, err := net.Listen("tcp", netip.AddrPortFrom(ipHeld, 8080).String())
	if err != nil {
		t.Fatal(err)
	}
	d, err := New(Config{Logger: dataplanetest.Logger(t)}) // binds the service addresses
	if err != nil {
		t.Fatal(err)
	}
	defer d.Cleanup(context.Background())
	st := stateOf(svcView("held", ipHeld, protoTCP, 8080, a.addr), svcView("good", ipGood, protoTCP, 8080, a.addr))
	apply(t, d, st) // fails the test on an error
	if got := len(d.Listeners()); got != 1 {
		t.Fatalf("%d listeners with one address held, want the other one", got)
	}
	if s, err := dialName(t, netip.AddrPortFrom(ipGood, 8080)); err != nil {
		t.Fatalf("good frontend: %v", err)
	} else {
		s.conn.Close()
	}
	holder.Close()
	apply(t, d, st)
	s, err := dialName(t, netip.AddrPortFrom(ipHeld, 8080))
	if err != nil {
		t.Fatalf("frontend once its port is free: %v", err)
	}
	s.conn.Close()
}

// TestCleanupAndContextStopEverything: Cleanup (or the end of
// Config.Context) closes listeners and established connections and
// returns only when every goroutine of the mode has stopped.
func TestCleanupAndContextStopEverything(t *testing.T) {
	for _, viaCtx := range []bool{false, true} {
		t.Run(map[bool]string{false: "Cleanup", true: "context"}[viaCtx], func(t *testing.T) {
			a := startBackend(t, "a")
			ctx, cancel := context.WithCancel(t.Context())
			defer cancel()
			d := newLoopbackDP(t, Config{Context: ctx})
			apply(t, d, stateOf(svcView("web", vip, protoTCP, 80, a.addr), svcView("dns", vip, protoUDP, 53, a.addr)))
			front := boundOf(t, d, "web", dataplane.TCP)
			s, err := dialName(t, front)
			if err != nil {
				t.Fatal(err)
			}
			defer s.conn.Close()
			if viaCtx {
				cancel()
				dataplanetest.Eventually(t, 5*time.Second, "listeners to close", func() bool { return len(d.Listeners()) == 0 })
			}
			// Bounded: a goroutine left running fails here instead of hanging.
			cctx, ccancel := context.WithTimeout(t.Context(), 5*time.Second)
			defer ccancel()
			if err := d.Cleanup(cctx); err != nil {
				t.Fatal(err)
			}
			if n := len(d.Listeners()); n != 0 {
				t.Errorf("%d listeners after Cleanup", n)
			}
			if err := s.echo("after cleanup"); err == nil {
				t.Error("established connection survived Cleanup")
			}
			if _, err := dialName(t, front); err == nil {
				t.Error("listener still accepts after Cleanup")
			}
			err = d.Apply(t.Context(), stateOf(svcView("web", vip, protoTCP, 80, a.addr)), dataplane.ApplyOptions{})
			if viaCtx != (err != nil) {
				t.Errorf("Apply after stop = %v; want an error only once the context is done", err)
			}
		})
	}
}
