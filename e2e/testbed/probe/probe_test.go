package probe_test

import (
	"context"
	"errors"
	"net"
	"net/netip"
	"os"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"go.uber.org/goleak"

	"github.com/switchyard-proxy/switchyard/e2e/testbed/echo"
	"github.com/switchyard-proxy/switchyard/e2e/testbed/netns"
	"github.com/switchyard-proxy/switchyard/e2e/testbed/probe"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// here runs functions in the current namespace. These tests only use
// 127.0.0.1, so they need no root and change nothing outside the process.
type here struct{}

func (here) Do(_ string, fn func() error) error { return fn() }

// failing is a Runner that cannot enter namespaces.
type failing struct{ err error }

func (f failing) Do(string, func() error) error { return f.err }

var loopback = netip.MustParseAddr("127.0.0.1")

func serve(t *testing.T, cfg echo.Config) *echo.Server {
	t.Helper()
	return echo.ServeLoopback(t, cfg, netns.TestLogger(t))
}

func addrPort(t *testing.T, a net.Addr) netip.AddrPort {
	t.Helper()
	ap, err := netip.ParseAddrPort(a.String())
	if err != nil {
		t.Fatal(err)
	}
	return ap
}

// freePort returns a loopback port with nothing listening.
func freePort(t *testing.T, network string) netip.AddrPort {
	t.Helper()
	var a net.Addr
	if network == "tcp" {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		a = l.Addr()
		l.Close()
	} else {
		c, err := net.ListenPacket("udp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		a = c.LocalAddr()
		c.Close()
	}
	return addrPort(t, a)
}

func TestTCPAndUDPCounts(t *testing.T) {
	srv := serve(t, echo.Config{Name: "pod-a", ReportClient: true})
	p := probe.New(here{}, "test")
	for name, run := range map[string]func() (probe.Result, error){
		"tcp": func() (probe.Result, error) {
			return p.TCP(t.Context(), addrPort(t, srv.TCPAddr()), probe.Options{Count: 10})
		},
		"tcp parallel": func() (probe.Result, error) {
			return p.TCP(t.Context(), addrPort(t, srv.TCPAddr()), probe.Options{Count: 10, Parallel: 4})
		},
		"udp": func() (probe.Result, error) {
			return p.UDP(t.Context(), addrPort(t, srv.UDPAddr()), probe.Options{Count: 10})
		},
		"udp reuse": func() (probe.Result, error) {
			return p.UDP(t.Context(), addrPort(t, srv.UDPAddr()), probe.Options{Count: 10, ReuseSocket: true})
		},
	} {
		res, err := run()
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if diff := cmp.Diff(map[string]int{"pod-a": 10}, res.Counts); diff != "" || len(res.Failures) > 0 {
			t.Errorf("%s: counts (-want +got):\n%s\n%s", name, diff, res)
		}
		if diff := cmp.Diff(map[string]int{"127.0.0.1": 10}, res.Clients); diff != "" {
			t.Errorf("%s: clients (-want +got):\n%s", name, diff)
		}
		if res.Attempts != 10 {
			t.Errorf("%s: attempts = %d, want 10", name, res.Attempts)
		}
	}
}

// TestUDPSourcePorts checks that exchanges use a new socket each unless
// ReuseSocket is set, and with DistinctSources never the same port twice.
func TestUDPSourcePorts(t *testing.T) {
	conn, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	ports := map[string]bool{}
	done := make(chan struct{})
	go func() {
		defer close(done)
		buf := make([]byte, 1500)
		for {
			_, from, err := conn.ReadFrom(buf)
			if err != nil {
				return
			}
			mu.Lock()
			ports[from.String()] = true
			mu.Unlock()
			_, _ = conn.WriteTo([]byte("sink"), from)
		}
	}()
	t.Cleanup(func() { conn.Close(); <-done })
	p := probe.New(here{}, "test")
	for _, tc := range []struct {
		reuse, distinct bool
		count, want     int
	}{{false, false, 8, 8}, {true, false, 8, 1}, {false, true, 300, 300}} {
		mu.Lock()
		clear(ports)
		mu.Unlock()
		res, err := p.UDP(t.Context(), addrPort(t, conn.LocalAddr()),
			probe.Options{Count: tc.count, ReuseSocket: tc.reuse, DistinctSources: tc.distinct})
		if err != nil || res.Counts["sink"] != tc.count {
			t.Fatalf("reuse=%v distinct=%v: %v %s", tc.reuse, tc.distinct, err, res)
		}
		mu.Lock()
		got := len(ports)
		mu.Unlock()
		if got != tc.want {
			t.Errorf("reuse=%v distinct=%v: %d distinct source ports, want %d", tc.reuse, tc.distinct, got, tc.want)
		}
	}
}

func TestFailures(t *testing.T) {
	p := probe.New(here{}, "test")
	ctx := t.Context()

	res, err := p.TCP(ctx, freePort(t, "tcp"), probe.Options{Count: 3})
	if err != nil || res.Reasons()[probe.ReasonRefused] != 3 || res.Succeeded() != 0 {
		t.Errorf("tcp to a closed port: %v %s; want 3 refused", err, res)
	}
	res, err = p.UDP(ctx, freePort(t, "udp"), probe.Options{Count: 3})
	if err != nil || res.Reasons()[probe.ReasonRefused] != 3 {
		t.Errorf("udp to a closed port: %v %s; want 3 refused", err, res)
	}

	// A listener that never accepts: the handshake completes in the kernel,
	// no reply ever comes.
	silent, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer silent.Close()
	start := time.Now()
	res, err = p.TCP(ctx, addrPort(t, silent.Addr()), probe.Options{Count: 2, Timeout: 100 * time.Millisecond})
	if err != nil || res.Reasons()[probe.ReasonTimeout] != 2 {
		t.Errorf("silent server: %v %s; want 2 timeouts", err, res)
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Errorf("two 100ms timeouts took %v", d)
	}

	// A server that closes without a reply.
	mute := serveFunc(t, func(c net.Conn) { c.Close() })
	res, err = p.TCP(ctx, mute, probe.Options{Count: 2})
	if err != nil || res.Reasons()[probe.ReasonBadReply] != 2 {
		t.Errorf("mute server: %v %s; want 2 bad-reply", err, res)
	}
}

func serveFunc(t *testing.T, handle func(net.Conn)) netip.AddrPort {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			handle(c)
		}
	}()
	t.Cleanup(func() { l.Close(); <-done })
	return addrPort(t, l.Addr())
}

func TestRunnerErrorAborts(t *testing.T) {
	boom := errors.New("no such namespace")
	p := probe.New(failing{boom}, "ns")
	dst := netip.AddrPortFrom(loopback, 9)
	if _, err := p.TCP(t.Context(), dst, probe.Options{Count: 5}); !errors.Is(err, boom) {
		t.Errorf("TCP with failing runner = %v, want %v", err, boom)
	}
	if _, err := p.UDP(t.Context(), dst, probe.Options{ReuseSocket: true}); !errors.Is(err, boom) {
		t.Errorf("UDP reuse with failing runner = %v, want %v", err, boom)
	}
	if _, err := p.Stream(t.Context(), dst, probe.StreamOptions{Rate: 100, Duration: time.Second}); !errors.Is(err, boom) {
		t.Errorf("Stream with failing runner = %v, want %v", err, boom)
	}
}

func TestStream(t *testing.T) {
	srv := serve(t, echo.Config{Name: "pod-s"})
	p := probe.New(here{}, "test")
	res, err := p.Stream(t.Context(), addrPort(t, srv.TCPAddr()), probe.StreamOptions{Rate: 200, Duration: 300 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	// A ticker drops ticks under load; require a sane lower bound only.
	if res.Attempts < 20 || res.Attempts > 61 || len(res.Failures) > 0 || res.Counts["pod-s"] != res.Attempts {
		t.Errorf("stream 200/s for 300ms: %s; want 20..61 attempts, all from pod-s", res)
	}

	// Cancelling the context ends a stream without an error.
	ctx, cancel := context.WithCancel(t.Context())
	time.AfterFunc(100*time.Millisecond, cancel)
	res, err = p.Stream(ctx, addrPort(t, srv.UDPAddr()), probe.StreamOptions{Network: "udp", Rate: 100})
	if err != nil || res.Attempts == 0 || len(res.Failures) > 0 {
		t.Errorf("cancelled udp stream: %v %s", err, res)
	}
}

func TestClassify(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want probe.Reason
	}{
		{&net.OpError{Op: "dial", Err: os.NewSyscallError("connect", syscall.ECONNREFUSED)}, probe.ReasonRefused},
		{&net.OpError{Op: "read", Err: os.NewSyscallError("read", syscall.ECONNRESET)}, probe.ReasonReset},
		{&net.OpError{Op: "dial", Err: os.NewSyscallError("connect", syscall.EHOSTUNREACH)}, probe.ReasonUnreachable},
		{&net.OpError{Op: "dial", Err: os.NewSyscallError("connect", syscall.ENETUNREACH)}, probe.ReasonUnreachable},
		{os.ErrDeadlineExceeded, probe.ReasonTimeout},
		{context.DeadlineExceeded, probe.ReasonTimeout},
		{errors.New("weird"), probe.ReasonError},
	} {
		if got := probe.Classify(tc.err); got != tc.want {
			t.Errorf("Classify(%v) = %s, want %s", tc.err, got, tc.want)
		}
	}
}
