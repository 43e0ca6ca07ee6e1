package canary

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http/httptest"
	"net/netip"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"go.uber.org/goleak"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/switchyard-proxy/switchyard/dataplane"
	"github.com/switchyard-proxy/switchyard/nodeagent/internal/health"
	"github.com/switchyard-proxy/switchyard/nodeagent/internal/metrics"
	switchyardv1 "github.com/switchyard-proxy/switchyard/proto/switchyard/v1"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// datapath stands for the node's kernel: Dial forwards a connection to
// the canary's cluster IP as the rules in state say, to where Listen put
// the listener of the endpoint's address (a loopback port of the test's
// choosing), unless it is broken or a foreign server answers instead.
type datapath struct {
	t *testing.T

	mu      sync.Mutex
	state   *dataplane.State
	broken  error
	foreign string
	listens map[string]string
	listenE error
	dials   int
}

func (p *datapath) Listen(ctx context.Context, network, addr string) (net.Listener, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.listenE != nil {
		return nil, p.listenE
	}
	l, err := (&net.ListenConfig{}).Listen(ctx, network, "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	p.listens[addr] = l.Addr().String()
	return l, nil
}

func (p *datapath) Dial(ctx context.Context, network, addr string) (net.Conn, error) {
	p.mu.Lock()
	p.dials++
	to, err := p.forward(addr)
	p.mu.Unlock()
	if err != nil {
		return nil, err
	}
	return (&net.Dialer{}).DialContext(ctx, network, to)
}

// forward is the DNAT of the canary's rules: cluster IP:port to the
// endpoint, then to the loopback port its listener really has.
func (p *datapath) forward(addr string) (string, error) {
	if p.broken != nil {
		return "", p.broken
	}
	if p.foreign != "" {
		return p.foreign, nil
	}
	sv := p.state.Services[Name]
	if sv == nil || len(sv.GetClusterIps()) == 0 || netip.AddrPortFrom(netip.MustParseAddr(sv.GetClusterIps()[0]), uint16(sv.GetPorts()[0].GetPort())).String() != addr {
		return "", fmt.Errorf("dial %s: %w", addr, syscall.ECONNREFUSED)
	}
	ep := sv.GetClusterEndpoints()[0]
	to, ok := p.listens[net.JoinHostPort(ep.GetAddress(), fmt.Sprint(ep.GetPorts()[0].GetPort()))]
	if !ok {
		return "", fmt.Errorf("dial %s: nothing listens on the endpoint: %w", addr, syscall.ECONNREFUSED)
	}
	return to, nil
}

func (p *datapath) set(f func(p *datapath)) {
	p.mu.Lock()
	defer p.mu.Unlock()
	f(p)
}

type bed struct {
	t       *testing.T
	c       *Canary
	path    *datapath
	clk     *clocktesting.FakeClock
	tracker *health.Tracker
	metrics *metrics.Metrics
	armed   bool
}

func newBed(t *testing.T, nodeIPs ...string) *bed {
	t.Helper()
	b := &bed{t: t, clk: clocktesting.NewFakeClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)), metrics: metrics.New(), armed: true}
	b.path = &datapath{t: t, listens: map[string]string{}}
	b.tracker = health.NewTracker(b.clk, "node-a", time.Minute)
	c, err := New(Config{VIP: netip.MustParseAddrPort("10.96.255.200:80"), Port: 10264, Interval: 2 * time.Second,
		Armed: func() bool { return b.armed }, Health: b.tracker, Metrics: b.metrics, Clock: b.clk,
		Logger: slog.New(slog.NewTextHandler(t.Output(), nil)), Dial: b.path.Dial, Listen: b.path.Listen})
	if err != nil {
		t.Fatal(err)
	}
	b.c = c
	st := &dataplane.State{Config: &switchyardv1.NodeConfig{NodeName: "node-a", NodeIps: nodeIPs}, Services: map[string]*switchyardv1.ServiceView{}}
	c.Decorate(st, nil)
	b.path.state = st
	t.Cleanup(c.closeListener)
	return b
}

// probes counts the probes of each result.
func (b *bed) probes() string {
	rec := httptest.NewRecorder()
	b.metrics.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	var out []string
	for l := range strings.SplitSeq(rec.Body.String(), "\n") {
		if strings.HasPrefix(l, "switchyard_agent_datapath_") {
			out = append(out, l)
		}
	}
	return strings.Join(out, "; ")
}

// TestThresholds: two failed probes in a row make the datapath
// unhealthy, one success healthy again; a failure between successes
// does not count. A foreign answer (the connection went elsewhere) is a
// failure.
func TestThresholds(t *testing.T) {
	refused := fmt.Errorf("dial: %w", syscall.ECONNREFUSED)
	foreign, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			conn, err := foreign.Accept()
			if err != nil {
				return
			}
			_, _ = conn.Write([]byte("0123456789abcdef0123456789abcdef"))
			_ = conn.Close()
		}
	}()
	defer func() { _ = foreign.Close(); <-done }()
	ok := func(p *datapath) { p.broken, p.foreign = nil, "" }
	broken := func(p *datapath) { p.broken = refused }
	elsewhere := func(p *datapath) { p.foreign = foreign.Addr().String() }
	steps := []struct {
		path    func(*datapath)
		healthy bool
		err     string
	}{
		{ok, true, ""},
		{broken, true, "connection refused"},
		{ok, true, ""},
		{broken, true, "connection refused"},
		{broken, false, "connection refused"},
		{broken, false, "connection refused"},
		{ok, true, ""},
		{elsewhere, true, "not as this agent's canary listener"},
		{elsewhere, false, "not as this agent's canary listener"},
		{ok, true, ""},
	}
	b := newBed(t, "10.200.0.10")
	for i, s := range steps {
		b.path.set(s.path)
		b.clk.Step(time.Second)
		b.c.tick(t.Context())
		if got := b.tracker.Healthy(); got != s.healthy {
			t.Errorf("step %d: Healthy = %t, want %t", i, got, s.healthy)
		}
		st := b.status()
		if st.LastProbe != b.clk.Now() || !strings.Contains(st.Err, s.err) || (s.err == "") != (st.Err == "") {
			t.Errorf("step %d: status %+v, want an error with %q", i, st, s.err)
		}
	}
	want := `switchyard_agent_datapath_healthy 1; switchyard_agent_datapath_probes_total{result="failed"} 6; switchyard_agent_datapath_probes_total{result="ok"} 4`
	if got := b.probes(); got != want {
		t.Errorf("metrics:\n got %s\nwant %s", got, want)
	}
}

func (b *bed) status() health.DatapathStatus {
	b.t.Helper()
	st, ok := b.tracker.Datapath()
	if !ok {
		b.t.Fatal("no datapath status")
	}
	return st
}

// TestNotCountedBeforeFirstSync: before the first successful sync the
// kernel holds nothing the agent programmed, so no probe runs and
// /healthz does not show one.
func TestNotCountedBeforeFirstSync(t *testing.T) {
	b := newBed(t, "10.200.0.10")
	b.armed = false
	b.path.set(func(p *datapath) { p.broken = errors.New("no rules yet") })
	for range 3 {
		b.c.tick(t.Context())
	}
	if _, ok := b.tracker.Datapath(); ok || !b.tracker.Healthy() || b.path.dials != 0 {
		t.Errorf("probed before the first sync: dials %d, healthy %t", b.path.dials, b.tracker.Healthy())
	}
	b.armed = true
	b.c.tick(t.Context())
	b.c.tick(t.Context())
	if b.tracker.Healthy() || b.path.dials != 2 {
		t.Errorf("after the first sync: dials %d, healthy %t; want 2 failed probes, unhealthy", b.path.dials, b.tracker.Healthy())
	}
}

// TestSkipped: a probe that cannot run (no node address of the family,
// the canary's port taken) is no evidence against the datapath: healthy,
// failures forgotten, the reason in /healthz.
func TestSkipped(t *testing.T) {
	t.Run("no node address of the family", func(t *testing.T) {
		b := newBed(t, "fd00::10")
		b.c.tick(t.Context())
		b.c.tick(t.Context())
		if st := b.status(); !st.Healthy || !strings.Contains(st.Err, "not probed: the NodeConfig names no IPv4 node address") || b.path.dials != 0 {
			t.Errorf("status %+v, dials %d", st, b.path.dials)
		}
		if got, want := b.probes(), `switchyard_agent_datapath_healthy 1; switchyard_agent_datapath_probes_total{result="skipped"} 2`; got != want {
			t.Errorf("metrics:\n got %s\nwant %s", got, want)
		}
	})
	t.Run("port taken", func(t *testing.T) {
		b := newBed(t, "10.200.0.10")
		b.path.set(func(p *datapath) { p.broken = syscall.ECONNREFUSED })
		b.c.tick(t.Context())
		b.path.set(func(p *datapath) { p.listenE = syscall.EADDRINUSE })
		b.c.closeListener()
		b.c.tick(t.Context())
		b.path.set(func(p *datapath) { p.broken = nil; p.listenE = nil })
		if st := b.status(); !st.Healthy || !strings.Contains(st.Err, "canary listener on 10.200.0.10:10264") {
			t.Errorf("status %+v", st)
		}
		// The failure before the skip is forgotten: one more is not two in a row.
		b.path.set(func(p *datapath) { p.broken = syscall.ECONNREFUSED })
		b.c.tick(t.Context())
		if !b.tracker.Healthy() {
			t.Error("unhealthy after one failure past a skip")
		}
	})
}

// TestRun: Run probes every interval on its clock, moves the listener
// when the node's address changes, and closes it when ctx ends.
func TestRun(t *testing.T) {
	b := newBed(t, "10.200.0.10")
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- b.c.Run(ctx) }()
	dials := func() int {
		b.path.mu.Lock()
		defer b.path.mu.Unlock()
		return b.path.dials
	}
	for i := 1; i <= 3; i++ {
		waitFor(t, "the timer", b.clk.HasWaiters)
		if i == 3 {
			st := &dataplane.State{Config: &switchyardv1.NodeConfig{NodeName: "node-a", NodeIps: []string{"10.200.0.11"}}, Services: map[string]*switchyardv1.ServiceView{}}
			b.c.Decorate(st, nil)
			b.path.set(func(p *datapath) { p.state = st })
		}
		b.clk.Step(2 * time.Second)
		waitFor(t, fmt.Sprintf("probe %d", i), func() bool { return dials() == i })
	}
	waitFor(t, "the third probe's outcome", func() bool {
		st, ok := b.tracker.Datapath()
		return ok && st.LastProbe == b.clk.Now()
	})
	if st := b.status(); !st.Healthy || st.Err != "" {
		t.Errorf("after the node's address moved: %+v", st)
	}
	b.path.mu.Lock()
	listens := len(b.path.listens)
	b.path.mu.Unlock()
	if listens != 2 {
		t.Errorf("listened %d times, want 2 (the node's address moved once)", listens)
	}
	cancel()
	if err := <-done; err != nil {
		t.Errorf("Run: %v", err)
	}
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(time.Millisecond) // poll for the condition
	}
}
