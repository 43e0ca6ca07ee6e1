package conntrackreconcile

import (
	"context"
	"errors"
	"log/slog"
	"net/netip"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"go.uber.org/goleak"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/switchyard-proxy/switchyard/dataplane"
	"github.com/switchyard-proxy/switchyard/dataplane/conntrack"
	"github.com/switchyard-proxy/switchyard/dataplane/conntrack/conntracktest"
	"github.com/switchyard-proxy/switchyard/dataplane/dataplanetest"
	"github.com/switchyard-proxy/switchyard/nodeagent/internal/metrics"
	switchyardv1 "github.com/switchyard-proxy/switchyard/proto/switchyard/v1"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func ent(dst, reply string) conntrack.Entry {
	return conntrack.Entry{Src: netip.MustParseAddrPort("10.0.0.9:40000"), Dst: netip.MustParseAddrPort(dst), Reply: netip.MustParseAddrPort(reply)}
}

// source is a Current the test changes.
type source struct {
	mu   sync.Mutex
	snap Snapshot
	ok   bool
}

func (s *source) set(snap Snapshot, ok bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.snap, s.ok = snap, ok
}

func (s *source) current() (Snapshot, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.snap, s.ok
}

func newReconciler(t *testing.T, tab conntrack.Table, src *source, clk *clocktesting.FakeClock, m *metrics.Metrics) *Reconciler {
	t.Helper()
	r, err := New(Config{Table: tab, Interval: time.Minute, Current: src.current, Metrics: m, Clock: clk,
		Logger: slog.New(slog.NewTextHandler(t.Output(), nil))})
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func TestOnce(t *testing.T) {
	st := dataplanetest.NewState(nodeConfig(), udpService("dns", "10.96.0.10", "10.244.0.1"), udpService("empty", "10.96.0.11"))
	applied := Snapshot{State: st, Mode: switchyardv1.DataplaneMode_DATAPLANE_MODE_NFTABLES}
	fill := func(tab *conntracktest.Table) {
		tab.Add(dataplane.IPv4,
			ent("10.96.0.10:53", "10.244.0.1:5353"),      // live
			ent("10.96.0.10:53", "10.244.0.2:5353"),      // endpoint gone
			ent("10.96.0.11:53", "10.244.0.3:5353"),      // scaled to zero
			ent("10.96.0.12:53", "10.244.0.4:5353"),      // service gone
			ent("10.96.0.10:53", "10.96.0.10:53"),        // not NATed
			ent("198.51.100.1:53", "198.51.100.1:53"),    // not ours
			ent("192.168.1.10:30053", "10.244.0.1:5353"), // node port, live
		)
	}
	t.Run("deletes the stale entries, counts them by reason", func(t *testing.T) {
		tab, m := conntracktest.New(), metrics.New()
		fill(tab)
		r := newReconciler(t, tab, &source{snap: applied, ok: true}, clocktesting.NewFakeClock(time.Now()), m)
		res := r.Once(t.Context())
		if got := res[dataplane.IPv4]; got.Listed != 7 || got.Deleted != 4 {
			t.Errorf("IPv4: listed %d deleted %d, want 7 and 4", got.Listed, got.Deleted)
		}
		want := "IPv4 10.0.0.9:40000 -> 10.96.0.10:53 via 10.244.0.1:5353\nIPv4 10.0.0.9:40000 -> 192.168.1.10:30053 via 10.244.0.1:5353\nIPv4 10.0.0.9:40000 -> 198.51.100.1:53 via 198.51.100.1:53"
		if got := tab.Dump(); got != want {
			t.Errorf("table left:\n%s\nwant:\n%s", got, want)
		}
		expected := `
# HELP kubeproxy_conntrack_reconciler_deleted_entries_total Cumulative conntrack flows deleted by conntrack reconciler, by reason (endpoint_gone, no_endpoints, service_gone, not_nated)
# TYPE kubeproxy_conntrack_reconciler_deleted_entries_total counter
kubeproxy_conntrack_reconciler_deleted_entries_total{ip_family="IPv4",reason="endpoint_gone"} 1
kubeproxy_conntrack_reconciler_deleted_entries_total{ip_family="IPv4",reason="no_endpoints"} 1
kubeproxy_conntrack_reconciler_deleted_entries_total{ip_family="IPv4",reason="not_nated"} 1
kubeproxy_conntrack_reconciler_deleted_entries_total{ip_family="IPv4",reason="service_gone"} 1
`
		if err := testutil.GatherAndCompare(m.Registry(), strings.NewReader(expected), "kubeproxy_conntrack_reconciler_deleted_entries_total"); err != nil {
			t.Error(err)
		}
		if n := testutil.CollectAndCount(m.Registry(), "kubeproxy_conntrack_reconciler_sync_duration_seconds"); n != 2 {
			t.Errorf("duration series = %d, want one per family", n)
		}
	})
	for _, tc := range []struct {
		name string
		snap Snapshot
		ok   bool
	}{
		{"before the first sync", Snapshot{}, false},
		{"userspace does no DNAT", Snapshot{State: st, Mode: switchyardv1.DataplaneMode_DATAPLANE_MODE_USERSPACE}, true},
		{"dry-run programs nothing", Snapshot{State: st, Mode: switchyardv1.DataplaneMode_DATAPLANE_MODE_DRY_RUN}, true},
		{"a sync is changing the kernel", Snapshot{State: st, Mode: applied.Mode, Seq: 3}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tab := conntracktest.New()
			fill(tab)
			r := newReconciler(t, tab, &source{snap: tc.snap, ok: tc.ok}, clocktesting.NewFakeClock(time.Now()), nil)
			r.Once(t.Context())
			if tab.Lists != 0 || tab.Deletes != 0 {
				t.Errorf("%d lists, %d deletes; want none", tab.Lists, tab.Deletes)
			}
		})
	}
	t.Run("a sync during the listing: nothing judged stale", func(t *testing.T) {
		tab := conntracktest.New()
		fill(tab)
		src := &source{snap: Snapshot{State: st, Mode: applied.Mode, Seq: 2}, ok: true}
		// The sync programs an endpoint, then records it: the listing
		// saw Seq 2, the state is read at Seq 4.
		tab.OnList = func() { src.set(Snapshot{State: st, Mode: applied.Mode, Seq: 4}, true) }
		r := newReconciler(t, tab, src, clocktesting.NewFakeClock(time.Now()), nil)
		r.Once(t.Context())
		if tab.Lists != 2 || tab.Deletes != 0 {
			t.Errorf("%d lists, %d deletes; want both families listed, nothing deleted", tab.Lists, tab.Deletes)
		}
	})
	t.Run("a failure is counted and the other family still runs", func(t *testing.T) {
		tab, m := conntracktest.New(), metrics.New()
		tab.ListErr = errors.New("netlink: boom")
		r := newReconciler(t, tab, &source{snap: applied, ok: true}, clocktesting.NewFakeClock(time.Now()), m)
		r.Once(t.Context())
		if tab.Lists != 2 {
			t.Errorf("lists = %d, want both families", tab.Lists)
		}
		expected := `
# HELP switchyard_agent_conntrack_reconcile_errors_total Conntrack reconciles that failed to list or delete entries; retried at the next one
# TYPE switchyard_agent_conntrack_reconcile_errors_total counter
switchyard_agent_conntrack_reconcile_errors_total{ip_family="IPv4"} 1
switchyard_agent_conntrack_reconcile_errors_total{ip_family="IPv6"} 1
`
		if err := testutil.GatherAndCompare(m.Registry(), strings.NewReader(expected), "switchyard_agent_conntrack_reconcile_errors_total"); err != nil {
			t.Error(err)
		}
	})
}

func TestRun(t *testing.T) {
	st := dataplanetest.NewState(nodeConfig(), udpService("dns", "10.96.0.10", "10.244.0.1"))
	src := &source{}
	tab := conntracktest.New()
	clk := clocktesting.NewFakeClock(time.Now())
	r := newReconciler(t, tab, src, clk, nil)
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- r.Run(ctx) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run = %v", err)
		}
	}()
	waitFor := func(what string, cond func() bool) {
		t.Helper()
		deadline := time.Now().Add(10 * time.Second)
		for !cond() {
			if time.Now().After(deadline) {
				t.Fatalf("timed out waiting until %s", what)
			}
			time.Sleep(time.Millisecond)
		}
	}
	// Nothing applied yet: a trigger lists nothing.
	r.Trigger()
	src.set(Snapshot{State: st, Mode: switchyardv1.DataplaneMode_DATAPLANE_MODE_IPTABLES}, true)
	tab.Add(dataplane.IPv4, ent("10.96.0.10:53", "10.244.0.2:5353"))
	r.Trigger()
	waitFor("a trigger deletes the stale entry", func() bool { return tab.Dump() == "" })
	tab.Add(dataplane.IPv4, ent("10.96.0.10:53", "10.244.0.3:5353"))
	waitFor("the timer is armed", func() bool { return clk.HasWaiters() })
	clk.Step(time.Minute)
	waitFor("the periodic run deletes the next one", func() bool { return tab.Dump() == "" })
}
