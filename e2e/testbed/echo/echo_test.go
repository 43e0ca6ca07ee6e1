package echo_test

import (
	"bufio"
	"context"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"go.uber.org/goleak"

	"github.com/switchyard-proxy/switchyard/e2e/testbed/echo"
	"github.com/switchyard-proxy/switchyard/e2e/testbed/netns"
	"github.com/switchyard-proxy/switchyard/e2e/testbed/probe"
)

func TestMain(m *testing.M) {
	if code, ok := echo.RunChild(); ok {
		os.Exit(code)
	}
	goleak.VerifyTestMain(m)
}

func serveLoopback(t *testing.T, cfg echo.Config) *echo.Server {
	t.Helper()
	return echo.ServeLoopback(t, cfg, netns.TestLogger(t))
}

func dialTCP(t *testing.T, addr net.Addr) net.Conn {
	t.Helper()
	conn, err := net.DialTimeout("tcp", addr.String(), time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	if err := conn.SetDeadline(time.Now().Add(2 * time.Second)); err != nil {
		t.Fatal(err)
	}
	return conn
}

func TestServerTCP(t *testing.T) {
	srv := serveLoopback(t, echo.Config{Name: "pod-7"})
	line, err := bufio.NewReader(dialTCP(t, srv.TCPAddr())).ReadString('\n')
	if err != nil || line != "pod-7\n" {
		t.Fatalf("reply = %q, %v; want %q", line, err, "pod-7\n")
	}
}

func TestServerTCPEchoAndReportClient(t *testing.T) {
	srv := serveLoopback(t, echo.Config{Name: "pod-1", Mode: echo.ModeEcho, ReportClient: true})
	conn := dialTCP(t, srv.TCPAddr())
	r := bufio.NewReader(conn)
	line, err := r.ReadString('\n')
	if err != nil {
		t.Fatal(err)
	}
	name, client, err := echo.ParseReply([]byte(line))
	if err != nil || name != "pod-1" || client != conn.LocalAddr().String() {
		t.Fatalf("reply %q parsed as (%q, %q, %v); want pod-1 and %s", line, name, client, err, conn.LocalAddr())
	}
	if _, err := conn.Write([]byte("ping\n")); err != nil {
		t.Fatal(err)
	}
	if got, err := r.ReadString('\n'); err != nil || got != "ping\n" {
		t.Fatalf("echo = %q, %v", got, err)
	}
}

func TestServerUDP(t *testing.T) {
	for _, tc := range []struct {
		cfg  echo.Config
		want func(local string) string
	}{
		{echo.Config{Name: "pod-2"}, func(string) string { return "pod-2" }},
		{echo.Config{Name: "pod-3", ReportClient: true}, func(l string) string { return "pod-3 " + l }},
		{echo.Config{Name: "pod-4", Mode: echo.ModeEcho}, func(string) string { return "pod-4\nhello" }},
	} {
		srv := serveLoopback(t, tc.cfg)
		conn, err := net.Dial("udp", srv.UDPAddr().String())
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		_ = conn.SetDeadline(time.Now().Add(2 * time.Second))
		if _, err := conn.Write([]byte("hello")); err != nil {
			t.Fatal(err)
		}
		buf := make([]byte, 1024)
		n, err := conn.Read(buf)
		if err != nil {
			t.Fatal(err)
		}
		if got, want := string(buf[:n]), tc.want(conn.LocalAddr().String()); got != want {
			t.Errorf("%s: reply %q, want %q", tc.cfg.Name, got, want)
		}
	}
}

func TestConfigArgsRoundTrip(t *testing.T) {
	in := echo.Config{Name: "pod-0", TCP: ":8080", UDP: ":53", Mode: echo.ModeEcho, ReportClient: true, IdleTimeout: 5 * time.Second}
	got, err := echo.ParseArgs(in.Args(), os.Stderr)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(in, got); diff != "" {
		t.Errorf("round trip (-want +got):\n%s", diff)
	}
	for _, bad := range []echo.Config{{TCP: ":1"}, {Name: "a b", TCP: ":1"}, {Name: "x"}, {Name: "x", TCP: ":1", Mode: "loud"}} {
		if err := bad.Validate(); err == nil {
			t.Errorf("Validate(%+v) = nil, want error", bad)
		}
	}
}

func TestParseReply(t *testing.T) {
	for _, tc := range []struct{ in, name, client string }{
		{"pod-1", "pod-1", ""},
		{"pod-1\n", "pod-1", ""},
		{"pod-1 10.0.0.1:5555\n", "pod-1", "10.0.0.1:5555"},
		{"pod-1\npayload with spaces", "pod-1", ""},
	} {
		name, client, err := echo.ParseReply([]byte(tc.in))
		if err != nil || name != tc.name || client != tc.client {
			t.Errorf("ParseReply(%q) = %q, %q, %v", tc.in, name, client, err)
		}
	}
	for _, bad := range []string{"", "\n", "a b c"} {
		if _, _, err := echo.ParseReply([]byte(bad)); err == nil {
			t.Errorf("ParseReply(%q): want error", bad)
		}
	}
}

// TestLaunchInPods starts servers as child processes in pod namespaces (self
// re-exec), probes them, stops one and sees it refuse.
func TestLaunchInPods(t *testing.T) {
	topo := netns.New(t, netns.Spec{Nodes: 1, Pods: 2})
	ctx := t.Context()
	insts, err := echo.StartPods(ctx, echo.Launcher{Topo: topo}, topo.Pods(), echo.Config{TCP: ":8080", UDP: ":8080"})
	if err != nil {
		t.Fatal(err)
	}
	node := topo.Node(0)
	p := probe.New(topo, node.NS)
	for _, pod := range topo.Pods() {
		dst := netip.AddrPortFrom(pod.IP, 8080)
		for _, run := range []func(context.Context, netip.AddrPort, probe.Options) (probe.Result, error){p.TCP, p.UDP} {
			res, err := run(ctx, dst, probe.Options{Count: 5})
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(map[string]int{pod.Name: 5}, res.Counts); diff != "" {
				t.Errorf("%s (-want +got):\n%s\n%s", dst, diff, res)
			}
		}
	}
	if err := insts[0].Stop(ctx); err != nil {
		t.Fatal(err)
	}
	res, err := p.TCP(ctx, netip.AddrPortFrom(topo.Pods()[0].IP, 8080), probe.Options{Count: 3})
	if err != nil {
		t.Fatal(err)
	}
	if got := res.Reasons()[probe.ReasonRefused]; got != 3 {
		t.Errorf("after Stop: %s; want 3 refused", res)
	}
}

func TestLaunchFailsClearly(t *testing.T) {
	topo := netns.New(t, netns.Spec{})
	l := echo.Launcher{Topo: topo, Binary: "/bin/false"}
	_, err := l.Start(t.Context(), topo.Pods()[0].NS, echo.Config{Name: "x", TCP: ":8080"})
	if err == nil || !strings.Contains(err.Error(), "exited before ready") {
		t.Fatalf("Start(/bin/false) = %v, want 'exited before ready'", err)
	}
}

// TestLaunchBinary builds cmd/echo-server and runs it through Launcher.Binary.
func TestLaunchBinary(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a binary")
	}
	netns.RequireRoot(t)
	bin := filepath.Join(t.TempDir(), "echo-server")
	build := exec.CommandContext(t.Context(), "go", "build", "-o", bin, "github.com/switchyard-proxy/switchyard/e2e/cmd/echo-server")
	if out, err := build.CombinedOutput(); err != nil {
		t.Skipf("cannot build echo-server: %v\n%s", err, out)
	}
	topo := netns.New(t, netns.Spec{})
	pod := topo.Pods()[0]
	l := echo.Launcher{Topo: topo, Binary: bin}
	if _, err := l.Start(t.Context(), pod.NS, echo.Config{Name: "built", TCP: ":8081"}); err != nil {
		t.Fatal(err)
	}
	res, err := probe.New(topo, topo.Client().NS).TCP(t.Context(), netip.AddrPortFrom(pod.IP, 8081), probe.Options{Count: 3})
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(map[string]int{"built": 3}, res.Counts); diff != "" {
		t.Errorf("(-want +got):\n%s\n%s", diff, res)
	}
}

// TestEchoIdleTimeout: a conversation that keeps talking outlives the idle
// timeout (a long-lived connection of a long test is never cut); one
// that stays silent for it is closed.
func TestEchoIdleTimeout(t *testing.T) {
	srv := serveLoopback(t, echo.Config{Name: "pod-2", Mode: echo.ModeEcho, IdleTimeout: 300 * time.Millisecond})
	conn := dialTCP(t, srv.TCPAddr())
	r := bufio.NewReader(conn)
	if _, err := r.ReadString('\n'); err != nil {
		t.Fatal(err)
	}
	for i := range 8 { // 800 ms of talk, over twice the timeout
		time.Sleep(100 * time.Millisecond)
		if _, err := conn.Write([]byte("ping\n")); err != nil {
			t.Fatalf("write %d: %v", i, err)
		}
		if line, err := r.ReadString('\n'); err != nil || line != "ping\n" {
			t.Fatalf("echo %d = %q, %v", i, line, err)
		}
	}
	if err := conn.SetDeadline(time.Now().Add(2 * time.Second)); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	if _, err := r.ReadString('\n'); err == nil {
		t.Fatal("a silent conversation got an answer")
	} else if waited := time.Since(start); waited > 1500*time.Millisecond {
		t.Fatalf("closed after %v of silence (%v), want about the 300 ms idle timeout", waited, err)
	}
}
