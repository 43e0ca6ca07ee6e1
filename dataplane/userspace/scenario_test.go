package userspace

import (
	"context"
	"net"
	"net/netip"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/switchyard-proxy/switchyard/dataplane"
	"github.com/switchyard-proxy/switchyard/dataplane/explain"
	"github.com/switchyard-proxy/switchyard/dataplane/scenario"
)

// loopbackSockets is the Sockets seam of a test without root: every
// listener opens on a free loopback port of its family, whatever address
// the mode asks for, so service and node addresses need not exist here.
// The Dataplane still decides what to open, and reports each listener's
// frontend, backends and the port it got.
type loopbackSockets struct{ HostSockets }

func loopback(a netip.AddrPort) netip.AddrPort {
	if a.Addr().Unmap().Is4() {
		return netip.AddrPortFrom(netip.MustParseAddr("127.0.0.1"), 0)
	}
	return netip.AddrPortFrom(netip.IPv6Loopback(), 0)
}

func (s loopbackSockets) ListenTCP(ctx context.Context, addr netip.AddrPort, _ bool) (*net.TCPListener, error) {
	return s.HostSockets.ListenTCP(ctx, loopback(addr), false)
}

func (s loopbackSockets) ListenUDP(ctx context.Context, addr netip.AddrPort, _ bool) (*net.UDPConn, error) {
	return s.HostSockets.ListenUDP(ctx, loopback(addr), false)
}

// newTracer applies each step through a real Dataplane over
// loopbackSockets and traces the listeners it then holds. After each
// sync it checks that the Dataplane holds exactly the listeners Planned
// says, so tracing its listeners with Planned's unserved frontends
// traces one state.
func newTracer(t *testing.T) scenario.Tracer {
	dp := newSeamDP(t)
	var planned Frontends
	tr := scenario.NewTracer(dp, func(pkt explain.Packet, _ []netip.Addr) (explain.Verdict, error) {
		return Trace(Frontends{Listeners: dp.Listeners(), Unserved: planned.Unserved}, pkt), nil
	})
	tr.Check = func(t testing.TB, st *dataplane.State, _ dataplane.ApplyOptions) {
		t.Helper()
		planned = Planned(st)
		if d := diffListeners(planned.Listeners, dp.Listeners()); d != "" {
			t.Fatalf("listeners differ from the plan (-planned +open):\n%s", d)
		}
	}
	return tr
}

// newSeamDP returns a Dataplane that binds service addresses, the
// default, through loopbackSockets, closed when the test ends.
func newSeamDP(t *testing.T) *Dataplane {
	t.Helper()
	return newTestDP(t, Config{Sockets: loopbackSockets{}})
}

// diffListeners compares listeners but where they are bound and their
// connections.
func diffListeners(planned, open []Listener) string {
	strip := func(ls []Listener) []Listener {
		out := make([]Listener, len(ls))
		for i, l := range ls {
			l.Bound, l.Active = netip.AddrPort{}, 0
			out[i] = l
		}
		return out
	}
	return cmp.Diff(strip(planned), strip(open), cmp.Comparer(func(a, b netip.AddrPort) bool { return a == b }))
}

// TestScenarios runs the table on IPv4 and IPv6, then walks the golden
// inputs against the explainer with the wide probes, as the other modes
// do (a node port on loopback of a node without node IPs is served by
// this mode's wildcard listeners, which the explainer knows).
func TestScenarios(t *testing.T) {
	scenario.RunAll(t, newTracer, scenario.AgreeOptions{Probes: scenario.WideProbes, Walk: true})
}
