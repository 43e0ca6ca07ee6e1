package iptables_test

import (
	"net/netip"
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/switchyard-proxy/switchyard/dataplane"
	"github.com/switchyard-proxy/switchyard/dataplane/dataplanetest"
	"github.com/switchyard-proxy/switchyard/dataplane/explain"
	"github.com/switchyard-proxy/switchyard/dataplane/iptables"
	"github.com/switchyard-proxy/switchyard/dataplane/iptables/iptablestest"
	"github.com/switchyard-proxy/switchyard/dataplane/scenario"
)

// scenarioTracer is the iptables mode under the scenario table: a
// Dataplane over a Fake, synced as an agent syncs it, and the Fake's
// packet tracer.
type scenarioTracer struct {
	f    *iptablestest.Fake
	d    *iptables.Dataplane
	prev *dataplane.State
}

func (s *scenarioTracer) Mode() string { return explain.ModeIPTables }

// Apply syncs st: in full the first time, then partially with the names
// of the services that changed, as the agent's syncer does.
func (s *scenarioTracer) Apply(t testing.TB, st *dataplane.State) {
	t.Helper()
	opts := dataplane.ApplyOptions{Full: s.prev == nil}
	if s.prev != nil {
		opts.Changed = changedServices(s.prev, st)
	}
	if err := s.d.Apply(t.Context(), st, opts); err != nil {
		t.Fatalf("Apply: %v", err)
	}
	s.prev = st
}

func (s *scenarioTracer) Trace(t testing.TB, pkt explain.Packet) explain.Verdict {
	t.Helper()
	v, err := s.f.Trace(pkt, nodeIPs(t, s.prev))
	if err != nil {
		t.Errorf("trace: %v", err)
	}
	return v
}

// changedServices names every service added, updated or removed between
// two states: the hint an agent passes with a partial sync.
func changedServices(prev, next *dataplane.State) map[string]struct{} {
	out := map[string]struct{}{}
	for n, sv := range next.Services {
		if !proto.Equal(prev.Services[n], sv) {
			out[n] = struct{}{}
		}
	}
	for n := range prev.Services {
		if _, ok := next.Services[n]; !ok {
			out[n] = struct{}{}
		}
	}
	return out
}

func nodeIPs(t testing.TB, st *dataplane.State) []netip.Addr {
	t.Helper()
	var out []netip.Addr
	for _, s := range st.Config.GetNodeIps() {
		a, err := netip.ParseAddr(s)
		if err != nil {
			t.Fatalf("node IP %q: %v", s, err)
		}
		out = append(out, a)
	}
	return out
}

func TestScenarios(t *testing.T) {
	scenario.Run(t, func(t *testing.T) scenario.Tracer {
		f := iptablestest.New()
		return &scenarioTracer{f: f, d: newDP(t, f)}
	})
}

// TestScenariosIPv6 runs the table with every address moved to IPv6.
func TestScenariosIPv6(t *testing.T) {
	scenario.Run(t, func(t *testing.T) scenario.Tracer {
		f := iptablestest.New()
		return iptablestest.IPv6(&scenarioTracer{f: f, d: newDP(t, f)})
	})
}

// TestTraceAgreesWithExplainer traces the probes of every golden input
// through the rules the mode programs for it and compares each verdict
// with the explainer's.
func TestTraceAgreesWithExplainer(t *testing.T) {
	for _, name := range dataplanetest.Views() {
		t.Run(name, func(t *testing.T) {
			st := dataplanetest.LoadState(t, name)
			f := iptablestest.New()
			tr := &scenarioTracer{f: f, d: newDP(t, f)}
			tr.Apply(t, st)
			for _, pkt := range iptablestest.Probes(st) {
				want := explain.Explain(st, explain.ModeIPTables, pkt)
				got := tr.Trace(t, pkt)
				if d := explain.Diff(want, got); len(d) > 0 {
					t.Errorf("%s: %s\n  explainer: %s\n  rules: %s\n  path: %s", pkt, strings.Join(d, "; "), want, got, strings.Join(got.Path, " > "))
				}
			}
		})
	}
}
