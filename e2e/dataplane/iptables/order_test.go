package iptables

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"sync"
	"testing"
	"time"

	"github.com/switchyard-proxy/switchyard/dataplane"
	"github.com/switchyard-proxy/switchyard/dataplane/iptables"
	"github.com/switchyard-proxy/switchyard/e2e/dataplane/dptest"
	"github.com/switchyard-proxy/switchyard/e2e/testbed/probe"
	switchyardv1 "github.com/switchyard-proxy/switchyard/proto/switchyard/v1"
)

// TestEndpointChangesNeverTimeOut probes two service addresses, from the
// client and from the node itself, while syncs swap which of the two has
// endpoints (one gains its first while the other loses its last, in one
// sync), on both flavours and among 1,000 other services, so that each
// table's commit takes a while. Every attempt must be refused (REJECT)
// or answered (DNAT): a timeout is a commit that left a port with
// neither (RELIABILITY.md, finding 1: filter committed before nat, and a
// port gaining endpoints had neither for ~15–20 ms).
func TestEndpointChangesNeverTimeOut(t *testing.T) {
	for _, fl := range flavours {
		t.Run(string(fl), func(t *testing.T) {
			b := newBed(t)
			dp := b.newDP(t, iptables.Config{Flavour: fl})
			vips := []netip.AddrPort{netip.MustParseAddrPort("10.96.100.1:80"), netip.MustParseAddrPort("10.96.100.2:80")}
			// served says which vip has endpoints; the other has none.
			stateFor := func(served int) *dataplane.State {
				var svcs []*switchyardv1.ServiceView
				for i := range 1000 {
					svcs = append(svcs, dptest.BenchService(i, false))
				}
				for i, v := range vips {
					sv := dptest.Service(fmt.Sprintf("swap%d", i), v.Addr().String(), uint32(v.Port()), 0)
					if i == served {
						sv = dptest.Service(sv.Name, v.Addr().String(), uint32(v.Port()), 0, b.Pods...)
					}
					svcs = append(svcs, sv)
				}
				return dptest.State(b.Node, svcs...)
			}
			states := []*dataplane.State{stateFor(0), stateFor(1)}
			apply := func(st *dataplane.State) time.Duration {
				start := time.Now()
				if err := dp.Apply(t.Context(), st, dataplane.ApplyOptions{}); err != nil {
					t.Fatalf("Apply: %v", err)
				}
				return time.Since(start)
			}
			apply(states[0])

			ctx, stop := context.WithCancel(t.Context())
			type stream struct {
				from string
				vip  netip.AddrPort
				res  probe.Result
				err  error
			}
			var streams []*stream
			for _, ns := range []string{b.Topo.Client().NS, b.Node.NS} {
				for _, v := range vips {
					streams = append(streams, &stream{from: ns, vip: v})
				}
			}
			var wg sync.WaitGroup
			for _, s := range streams {
				wg.Go(func() {
					s.res, s.err = probe.New(b.Topo, s.from).Stream(ctx, s.vip,
						// Below TCP's first SYN retransmit (1 s), so a SYN
						// lost in a gap still times out; long enough that a
						// probe starved of the CPU under CI load does not.
						probe.StreamOptions{Rate: 250, Timeout: 800 * time.Millisecond})
				})
			}
			const swaps = 20
			var took time.Duration
			for i := range swaps {
				time.Sleep(50 * time.Millisecond) // each state seen by some probes
				took += apply(states[(i+1)%2])
			}
			time.Sleep(50 * time.Millisecond)
			stop()
			wg.Wait()
			t.Logf("%d swaps, %v per sync", swaps, took/swaps)
			for _, s := range streams {
				if s.err != nil {
					t.Fatalf("probe %s → %s: %v", s.from, s.vip, s.err)
				}
				reasons := s.res.Reasons()
				t.Logf("%s → %s: %d answered, failures %v", s.from, s.vip, s.res.Succeeded(), reasons)
				if s.res.Succeeded() == 0 || reasons[probe.ReasonRefused] == 0 {
					t.Errorf("%s → %s: want both answered and refused attempts, got %v", s.from, s.vip, s.res)
				}
				for _, f := range s.res.Failures {
					switch {
					case f.Reason == probe.ReasonRefused:
					case connectedThenTimedOut(f):
						// The handshake went through, so the rules in
						// place then DNATed it: not the gap this test is
						// about (a SYN meeting neither REJECT nor DNAT
						// times out in the dial). Seen when the reply was
						// late under CI load.
						t.Logf("%s → %s: %v (connected: not a rule gap)", s.from, s.vip, f)
					default:
						t.Errorf("%s → %s: %v", s.from, s.vip, f)
					}
				}
			}
		})
	}
}

// connectedThenTimedOut reports whether f timed out reading the reply of
// a connection that was established.
func connectedThenTimedOut(f probe.Failure) bool {
	var op *net.OpError
	return f.Reason == probe.ReasonTimeout && errors.As(f.Err, &op) && op.Op == "read"
}
