package ipvs_test

import (
	"context"
	"errors"
	"net/netip"
	"strings"
	"testing"
	"time"

	clocktesting "k8s.io/utils/clock/testing"

	"github.com/google/go-cmp/cmp"

	"github.com/switchyard-proxy/switchyard/dataplane"
	"github.com/switchyard-proxy/switchyard/dataplane/dataplanetest"
	"github.com/switchyard-proxy/switchyard/dataplane/ipvs"
	"github.com/switchyard-proxy/switchyard/dataplane/ipvs/ipvstest"
	switchyardv1 "github.com/switchyard-proxy/switchyard/proto/switchyard/v1"
)

const tcp = switchyardv1.Protocol_PROTOCOL_TCP

var (
	vip   = ipvs.VSKey{Addr: netip.MustParseAddr("10.96.0.1"), Port: 80, Protocol: dataplane.TCP}
	ep1   = netip.MustParseAddrPort("10.244.0.1:8080")
	ep2   = netip.MustParseAddrPort("10.244.0.2:8080")
	epoch = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
)

func apply(t *testing.T, dp *ipvs.Dataplane, st *dataplane.State, full bool) {
	t.Helper()
	if err := dp.Apply(t.Context(), st, dataplane.ApplyOptions{Full: full}); err != nil {
		t.Fatalf("Apply: %v", err)
	}
}

func weight(t *testing.T, f *ipvstest.Fake, k ipvs.VSKey, a netip.AddrPort) int {
	t.Helper()
	rs, ok := f.RealServer(k, a)
	if !ok {
		return -1
	}
	return rs.Weight
}

// TestGracefulTermination: a removed TCP real server goes to weight 0 and
// is deleted when its connections end, or when the grace period is over.
func TestGracefulTermination(t *testing.T) {
	tests := []struct {
		name   string
		conns  [2]int        // active, inactive while draining
		drop   bool          // connections end after the first check
		wait   time.Duration // clock advance before the second check
		remain bool          // still draining after the second check
	}{
		{name: "connections end", conns: [2]int{3, 1}, drop: true, wait: time.Second},
		{name: "grace period over", conns: [2]int{1, 0}, wait: time.Minute},
		{name: "still busy within grace period", conns: [2]int{0, 2}, wait: 30 * time.Second, remain: true},
		{name: "no connections at all", conns: [2]int{0, 0}, wait: 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f, clk := ipvstest.New(), clocktesting.NewFakeClock(epoch)
			dp := newDataplane(t, f, ipvs.Config{Clock: clk, GracePeriod: time.Minute})
			apply(t, dp, state(nil, svc("a", "10.96.0.1", tcp, "10.244.0.1", "10.244.0.2")), false)
			if err := f.SetConns(vip, ep2, tc.conns[0], tc.conns[1]); err != nil {
				t.Fatal(err)
			}
			f.ResetCalls()
			apply(t, dp, state(nil, svc("a", "10.96.0.1", tcp, "10.244.0.1")), false)
			busy := tc.conns[0]+tc.conns[1] > 0
			if busy {
				if w := weight(t, f, vip, ep2); w != 0 {
					t.Fatalf("removed real server has weight %d, want 0 while draining", w)
				}
				if got := dp.LastSync().Draining; got != 1 {
					t.Fatalf("Draining = %d, want 1", got)
				}
			}
			if w := weight(t, f, vip, ep1); w != 1 {
				t.Fatalf("kept real server has weight %d", w)
			}
			if tc.drop {
				if err := f.SetConns(vip, ep2, 0, 0); err != nil {
					t.Fatal(err)
				}
			}
			clk.Step(tc.wait)
			left, err := dp.Drain(t.Context())
			if err != nil {
				t.Fatal(err)
			}
			_, present := f.RealServer(vip, ep2)
			if present != tc.remain || (left == 1) != tc.remain {
				t.Fatalf("after drain: present=%v left=%d, want remaining=%v\n%s", present, left, tc.remain, f.Dump())
			}
		})
	}
}

// TestRunDrains: Run checks draining real servers every DrainInterval of
// the injected clock.
func TestRunDrains(t *testing.T) {
	f, clk := ipvstest.New(), clocktesting.NewFakeClock(epoch)
	dp := newDataplane(t, f, ipvs.Config{Clock: clk, DrainInterval: time.Second})
	apply(t, dp, state(nil, svc("a", "10.96.0.1", tcp, "10.244.0.1", "10.244.0.2")), false)
	if err := f.SetConns(vip, ep2, 1, 0); err != nil {
		t.Fatal(err)
	}
	apply(t, dp, state(nil, svc("a", "10.96.0.1", tcp, "10.244.0.1")), false)
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- dp.Run(ctx) }()
	if err := f.SetConns(vip, ep2, 0, 0); err != nil {
		t.Fatal(err)
	}
	dataplanetest.Eventually(t, 5*time.Second, "Run to wait on the clock", func() bool { return clk.HasWaiters() })
	clk.Step(time.Second)
	dataplanetest.Eventually(t, 5*time.Second, "the drained real server to go", func() bool { _, ok := f.RealServer(vip, ep2); return !ok })
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

// TestRestartDoesNotLeaveWeightZero: a new agent (fresh Dataplane) finds
// real servers a previous one left at weight 0. Wanted ones are
// re-weighted; unwanted ones keep draining (kube-proxy 92019, 108319).
func TestRestartDoesNotLeaveWeightZero(t *testing.T) {
	f, clk := ipvstest.New(), clocktesting.NewFakeClock(epoch)
	old := newDataplane(t, f, ipvs.Config{Clock: clk})
	apply(t, old, state(nil, svc("a", "10.96.0.1", tcp, "10.244.0.1", "10.244.0.2")), false)
	if err := f.SetConns(vip, ep1, 5, 0); err != nil {
		t.Fatal(err)
	}
	if err := f.SetConns(vip, ep2, 5, 0); err != nil {
		t.Fatal(err)
	}
	// The endpoints go away, then the agent dies mid-drain.
	apply(t, old, state(nil, svc("a", "10.96.0.1", tcp, "10.244.0.3")), false)
	if weight(t, f, vip, ep1) != 0 || weight(t, f, vip, ep2) != 0 {
		t.Fatalf("not draining:\n%s", f.Dump())
	}
	// The restarted agent's state wants ep1 again, not ep2.
	fresh := newDataplane(t, f, ipvs.Config{Clock: clk})
	f.ResetCalls()
	apply(t, fresh, state(nil, svc("a", "10.96.0.1", tcp, "10.244.0.1", "10.244.0.3")), false)
	if w := weight(t, f, vip, ep1); w != 1 {
		t.Errorf("wanted real server has weight %d after restart, want 1\n%s", w, f.Dump())
	}
	if w := weight(t, f, vip, ep2); w != 0 {
		t.Errorf("unwanted busy real server: weight %d, want 0 (still draining)", w)
	}
	if err := f.SetConns(vip, ep2, 0, 0); err != nil {
		t.Fatal(err)
	}
	if left, err := fresh.Drain(t.Context()); err != nil || left != 0 {
		t.Fatalf("Drain = %d, %v; want 0, nil", left, err)
	}
	if _, ok := f.RealServer(vip, ep2); ok {
		t.Error("drained real server still there")
	}
}

// TestLastEndpointDrains: a virtual server whose endpoints all went keeps
// draining, new connections are rejected by the filter rules, and it goes
// once drained.
func TestLastEndpointDrains(t *testing.T) {
	f, clk := ipvstest.New(), clocktesting.NewFakeClock(epoch)
	dp := newDataplane(t, f, ipvs.Config{Clock: clk})
	apply(t, dp, state(nil, svc("a", "10.96.0.1", tcp, "10.244.0.1")), false)
	if err := f.SetConns(vip, ep1, 1, 0); err != nil {
		t.Fatal(err)
	}
	apply(t, dp, state(nil, svc("a", "10.96.0.1", tcp)), false)
	if w := weight(t, f, vip, ep1); w != 0 {
		t.Fatalf("weight %d, want 0\n%s", w, f.Dump())
	}
	if got := f.SetMembers("SWYD-IPVS-REJECT"); !cmp.Equal(got, []string{"10.96.0.1,tcp:80"}) {
		t.Errorf("REJECT set = %v", got)
	}
	if err := f.SetConns(vip, ep1, 0, 0); err != nil {
		t.Fatal(err)
	}
	if _, err := dp.Drain(t.Context()); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(f.Dump(), "vs TCP 10.96.0.1:80") {
		t.Errorf("empty virtual server left after drain:\n%s", f.Dump())
	}
	f.ResetCalls()
	apply(t, dp, state(nil, svc("a", "10.96.0.1", tcp)), false)
	apply(t, dp, state(nil, svc("a", "10.96.0.1", tcp)), true)
	if m := f.MutatingCalls(); len(m) > 0 {
		t.Errorf("re-apply changed the kernel: %v", m)
	}
}

// TestUDPRemovedAtOnce: UDP has no connection end to wait for: the real
// server goes at once and its conntrack entries are flushed.
func TestUDPRemovedAtOnce(t *testing.T) {
	f := ipvstest.New()
	ct := &conntrackRecorder{}
	dp := newDataplane(t, f, ipvs.Config{Conntrack: ct})
	udp := switchyardv1.Protocol_PROTOCOL_UDP
	apply(t, dp, state(nil, svc("dns", "10.96.0.10", udp, "10.244.0.1", "10.244.0.2")), false)
	f.ResetCalls()
	apply(t, dp, state(nil, svc("dns", "10.96.0.10", udp, "10.244.0.1")), false)
	want := []string{"DeleteRealServer UDP 10.96.0.10:80 10.244.0.2:8080", "ipset restore -exist"}
	if d := cmp.Diff(want, f.MutatingCalls()); d != "" {
		t.Errorf("calls (-want +got):\n%s", d)
	}
	if d := cmp.Diff([]string{"4 10.96.0.10:80 nodePort=false endpoint=10.244.0.2:8080"}, ct.Calls()); d != "" {
		t.Errorf("conntrack (-want +got):\n%s", d)
	}
}

func TestNoIPVSRefused(t *testing.T) {
	f := ipvstest.New()
	f.NoIPVS = true
	dp := newDataplane(t, f, ipvs.Config{})
	err := dp.Apply(t.Context(), state(nil, svc("a", "10.96.0.1", tcp, "10.244.0.1")), dataplane.ApplyOptions{})
	if !ipvs.IsIPVSUnavailable(err) {
		t.Fatalf("Apply on a kernel without IPVS: %v, want ErrIPVSUnavailable", err)
	}
	if m := f.MutatingCalls(); len(m) > 0 {
		t.Errorf("changed the kernel: %v", m)
	}
}

func TestSchedulers(t *testing.T) {
	for _, s := range []string{"", "rr", "wrr", "lc", "wlc", "lblc", "lblcr", "dh", "sh", "sed", "nq", "bogus"} {
		t.Run("scheduler="+s, func(t *testing.T) {
			f := ipvstest.New()
			logs := &logBuffer{}
			dp := newDataplane(t, f, ipvs.Config{Logger: logs.logger()})
			cfg := &switchyardv1.NodeConfig{IpvsScheduler: s}
			apply(t, dp, state(cfg, svc("a", "10.96.0.1", tcp, "10.244.0.1")), false)
			want := s
			if s == "" || s == "bogus" {
				want = "rr"
			}
			if !strings.Contains(f.Dump(), "vs TCP 10.96.0.1:80 "+want+"\n") {
				t.Errorf("want scheduler %s:\n%s", want, f.Dump())
			}
			if skipped := len(logs.lines("skipped input")) > 0; skipped != (s == "bogus") {
				t.Errorf("skip logged = %v", skipped)
			}
			// Switching scheduler updates the virtual server in place.
			f.ResetCalls()
			apply(t, dp, state(&switchyardv1.NodeConfig{IpvsScheduler: "sh"}, svc("a", "10.96.0.1", tcp, "10.244.0.1")), false)
			if want != "sh" && !cmp.Equal(f.MutatingCalls(), []string{"UpdateVirtualServer TCP 10.96.0.1:80 sh"}) {
				t.Errorf("scheduler change: %v", f.MutatingCalls())
			}
		})
	}
}

// TestServiceRemoved: a removed service loses its virtual server, its
// address and its set members.
func TestServiceRemoved(t *testing.T) {
	f := ipvstest.New()
	dp := newDataplane(t, f, ipvs.Config{})
	empty := ipvstest.New()
	apply(t, newDataplane(t, empty, ipvs.Config{}), state(nil), false)
	apply(t, dp, state(nil, svc("a", "10.96.0.1", tcp, "10.244.0.1")), false)
	apply(t, dp, state(nil), false)
	want := empty.Dump()
	got := f.Dump()
	// The link stays (it is only removed by Cleanup).
	got = strings.Replace(got, "link kube-ipvs0 dummy up\n", "", 1)
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("state after removal differs from never having had it (-want +got):\n%s", d)
	}
}

// TestFailureThenReadBack: a failed call leaves the kernel half done; the
// next Apply reads it back and finishes.
func TestFailureThenReadBack(t *testing.T) {
	f := ipvstest.New()
	dp := newDataplane(t, f, ipvs.Config{})
	boom := errors.New("boom")
	f.Fail = func(call string) error {
		if strings.HasPrefix(call, "AddRealServer") && strings.Contains(call, "10.244.0.2") {
			return boom
		}
		return nil
	}
	st := state(nil, svc("a", "10.96.0.1", tcp, "10.244.0.1", "10.244.0.2"))
	if err := dp.Apply(t.Context(), st, dataplane.ApplyOptions{}); !errors.Is(err, boom) {
		t.Fatalf("Apply: %v, want boom", err)
	}
	f.Fail = nil
	apply(t, dp, st, false)
	ref := ipvstest.New()
	apply(t, newDataplane(t, ref, ipvs.Config{}), st, false)
	if d := cmp.Diff(ref.Dump(), f.Dump()); d != "" {
		t.Errorf("not converged (-want +got):\n%s", d)
	}
}

func TestSysctlsSetOnce(t *testing.T) {
	f := ipvstest.New()
	dp := newDataplane(t, f, ipvs.Config{})
	apply(t, dp, state(nil), false)
	for _, name := range []string{"net.ipv4.vs.conntrack", "net.ipv4.vs.expire_nodest_conn", "net.ipv4.vs.expire_quiescent_template"} {
		if v := f.SysctlValue(name); v != "1" {
			t.Errorf("%s = %q, want 1", name, v)
		}
	}
}

func TestNewRejectsBadConfig(t *testing.T) {
	f := ipvstest.New()
	tests := []struct {
		name string
		cfg  ipvs.Config
	}{
		{"no kernel", ipvs.Config{Runner: f}},
		{"no runner", ipvs.Config{Kernel: f}},
		{"bad scheduler", ipvs.Config{Kernel: f, Runner: f, Scheduler: "fastest"}},
		{"bad family", ipvs.Config{Kernel: f, Runner: f, Families: []dataplane.Family{5}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := ipvs.New(tc.cfg); err == nil {
				t.Error("New accepted it")
			}
		})
	}
}
