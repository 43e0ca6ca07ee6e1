package canary

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http/httptest"
	"net/netip"
	"strings"
	"syscall"
	"testing"
	"time"

	"go.uber.org/goleak"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/switchyard-proxy/switchyard/dataplane"
	"github.com/switchyard-proxy/switchyard/nodeagent/internal/canary/canarytest"
	"github.com/switchyard-proxy/switchyard/nodeagent/internal/health"
	"github.com/switchyard-proxy/switchyard/nodeagent/internal/metrics"
	"github.com/switchyard-proxy/switchyard/nodeagent/internal/runtest"
	switchyardv1 "github.com/switchyard-proxy/switchyard/proto/switchyard/v1"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

type bed struct {
	t       *testing.T
	c       *Canary
	path    *canarytest.Datapath
	clk     *clocktesting.FakeClock
	tracker *health.Tracker
	metrics *metrics.Metrics
	armed   bool
}

func newBed(t *testing.T, nodeIPs ...string) *bed {
	t.Helper()
	b := &bed{t: t, clk: clocktesting.NewFakeClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)), metrics: metrics.New(), armed: true}
	b.path = &canarytest.Datapath{}
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
	b.program(st)
	t.Cleanup(c.closeListener)
	return b
}

// program has the datapath forward as st's rules say.
func (b *bed) program(st *dataplane.State) {
	b.path.Program(func() map[string]*switchyardv1.ServiceView { return st.Services })
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
	ok := canarytest.Faults{}
	broken := canarytest.Faults{Broken: refused}
	elsewhere := canarytest.Faults{Foreign: foreign.Addr().String()}
	steps := []struct {
		faults  canarytest.Faults
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
		b.path.SetFaults(s.faults)
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
	b.path.SetFaults(canarytest.Faults{Broken: errors.New("no rules yet")})
	for range 3 {
		b.c.tick(t.Context())
	}
	if _, ok := b.tracker.Datapath(); ok || !b.tracker.Healthy() || b.path.Dials() != 0 {
		t.Errorf("probed before the first sync: dials %d, healthy %t", b.path.Dials(), b.tracker.Healthy())
	}
	b.armed = true
	b.c.tick(t.Context())
	b.c.tick(t.Context())
	if b.tracker.Healthy() || b.path.Dials() != 2 {
		t.Errorf("after the first sync: dials %d, healthy %t; want 2 failed probes, unhealthy", b.path.Dials(), b.tracker.Healthy())
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
		if st := b.status(); !st.Healthy || !strings.Contains(st.Err, "not probed: the NodeConfig names no IPv4 node address") || b.path.Dials() != 0 {
			t.Errorf("status %+v, dials %d", st, b.path.Dials())
		}
		if got, want := b.probes(), `switchyard_agent_datapath_healthy 1; switchyard_agent_datapath_probes_total{result="skipped"} 2`; got != want {
			t.Errorf("metrics:\n got %s\nwant %s", got, want)
		}
	})
	t.Run("port taken", func(t *testing.T) {
		b := newBed(t, "10.200.0.10")
		b.path.SetFaults(canarytest.Faults{Broken: syscall.ECONNREFUSED})
		b.c.tick(t.Context())
		b.path.SetFaults(canarytest.Faults{Broken: syscall.ECONNREFUSED, ListenErr: syscall.EADDRINUSE})
		b.c.closeListener()
		b.c.tick(t.Context())
		b.path.SetFaults(canarytest.Faults{})
		if st := b.status(); !st.Healthy || !strings.Contains(st.Err, "canary listener on 10.200.0.10:10264") {
			t.Errorf("status %+v", st)
		}
		// The failure before the skip is forgotten: one more is not two in a row.
		b.path.SetFaults(canarytest.Faults{Broken: syscall.ECONNREFUSED})
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
	stop := runtest.Start(t, b.c.Run)
	for i := 1; i <= 3; i++ {
		runtest.Eventually(t, "the timer", b.clk.HasWaiters)
		if i == 3 {
			st := &dataplane.State{Config: &switchyardv1.NodeConfig{NodeName: "node-a", NodeIps: []string{"10.200.0.11"}}, Services: map[string]*switchyardv1.ServiceView{}}
			b.c.Decorate(st, nil)
			b.program(st)
		}
		b.clk.Step(2 * time.Second)
		runtest.Eventually(t, fmt.Sprintf("probe %d", i), func() bool { return b.path.Dials() == i })
	}
	runtest.Eventually(t, "the third probe's outcome", func() bool {
		st, ok := b.tracker.Datapath()
		return ok && st.LastProbe == b.clk.Now()
	})
	if st := b.status(); !st.Healthy || st.Err != "" {
		t.Errorf("after the node's address moved: %+v", st)
	}
	if listens := b.path.Listens(); listens != 2 {
		t.Errorf("listened %d times, want 2 (the node's address moved once)", listens)
	}
	stop()
}
