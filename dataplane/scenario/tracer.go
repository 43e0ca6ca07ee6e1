package scenario

import (
	"net/netip"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/switchyard-proxy/switchyard/dataplane"
	"github.com/switchyard-proxy/switchyard/dataplane/explain"
)

// TraceFunc traces pkt through what a mode's fake holds, on a node whose
// own addresses are nodeIPs (those of the state applied last). The
// Trace methods of iptablestest.Fake and ipvstest.Fake are TraceFuncs.
type TraceFunc func(pkt explain.Packet, nodeIPs []netip.Addr) (explain.Verdict, error)

// Synced is the Tracer of a mode's Dataplane over its fake. Apply syncs
// as the agent does, in full the first time and then partially with
// ApplyOptions.Changed naming the services added, updated or removed,
// so the table also checks the partial syncs every mode ships; Trace is
// the mode's packet tracer on what the fake then holds.
type Synced struct {
	// Check, when set, runs after each Apply that succeeded: a mode's own
	// check of what the sync left (nftables compares it with a fresh
	// load, userspace its listeners with Planned). opts are the options
	// the sync ran with.
	Check func(t testing.TB, st *dataplane.State, opts dataplane.ApplyOptions)

	dp      dataplane.Dataplane
	trace   TraceFunc
	prev    *dataplane.State
	nodeIPs []netip.Addr
}

// NewTracer is the Tracer of dp, whose packets trace traces. Its Mode is
// dp's: the mode names of dataplane.Dataplane and package explain are
// the same.
func NewTracer(dp dataplane.Dataplane, trace TraceFunc) *Synced {
	return &Synced{dp: dp, trace: trace}
}

// Mode is the Dataplane's mode.
func (s *Synced) Mode() string { return s.dp.Mode() }

// Apply syncs st: in full the first time, then partially with the names
// of the services that changed since the last Apply.
func (s *Synced) Apply(t testing.TB, st *dataplane.State) {
	t.Helper()
	opts := dataplane.ApplyOptions{Full: s.prev == nil}
	if s.prev != nil {
		opts.Changed = changed(s.prev, st)
	}
	if err := s.dp.Apply(t.Context(), st, opts); err != nil {
		t.Fatalf("Apply: %v", err)
	}
	s.prev, s.nodeIPs = st, nodeIPs(st)
	if s.Check != nil {
		s.Check(t, st, opts)
	}
}

// Trace traces pkt with the node IPs of the state applied last. A trace
// that fails fails the test; the verdict, as far as the trace got, still
// goes to the caller, whose diff shows where it stopped.
func (s *Synced) Trace(t testing.TB, pkt explain.Packet) explain.Verdict {
	t.Helper()
	v, err := s.trace(pkt, s.nodeIPs)
	if err != nil {
		t.Errorf("trace: %v", err)
	}
	return v
}

// changed names every service added, updated or removed between two
// states: the hint an agent passes with a partial sync.
func changed(prev, next *dataplane.State) map[string]struct{} {
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

// nodeIPs are the node's addresses in st. One that does not parse is
// left out, as every mode and the explainer skip it.
func nodeIPs(st *dataplane.State) []netip.Addr {
	var out []netip.Addr
	for _, s := range st.Config.GetNodeIps() {
		if a, err := netip.ParseAddr(s); err == nil {
			out = append(out, a.Unmap())
		}
	}
	return out
}
