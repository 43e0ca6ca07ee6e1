package syncer

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/switchyard-proxy/switchyard/dataplane"
	switchyardv1 "github.com/switchyard-proxy/switchyard/proto/switchyard/v1"
)

// fakePeer is kube-proxy as the hand-over sees it: whether it runs, has
// programmed its rules, has left rules in the kernel; its calls go to the
// harness's log.
type fakePeer struct {
	h *harness

	mu                      sync.Mutex
	live, healthy, returned bool
	// adoptFails makes the next Adopt calls fail.
	adoptFails int
	// checks counts the checks: each calls one of Adopt, Returned, Live
	// first.
	checks int
}

func (p *fakePeer) checked() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.checks
}

// check moves the clock until the next peer check ran. A check may see
// the clock moved before its timer is armed again, so the clock moves in
// small steps until the check happened rather than by one interval.
func (p *fakePeer) check(what string) {
	p.h.t.Helper()
	n := p.checked()
	p.h.waitFor(what, func() bool {
		if p.checked() > n {
			return true
		}
		p.h.clk.Step(100 * time.Millisecond)
		return false
	})
}

func (p *fakePeer) set(live, healthy, returned bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.live, p.healthy, p.returned = live, healthy, returned
}

func (p *fakePeer) Adopt(_ context.Context, dp dataplane.Dataplane) (bool, error) {
	p.h.record("adopt kube-proxy's leftovers, forwarding with " + dp.Mode())
	p.mu.Lock()
	defer p.mu.Unlock()
	p.checks++
	if p.adoptFails > 0 {
		p.adoptFails--
		return false, errors.New("kube-proxy is running")
	}
	p.returned = false
	return true, nil
}

func (p *fakePeer) Returned(context.Context, dataplane.Dataplane) (bool, string, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.checks++
	return p.returned, "canary", nil
}

func (p *fakePeer) Live(context.Context) (bool, string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.checks++
	return p.live, ""
}

func (p *fakePeer) Healthy(context.Context, dataplane.Dataplane) (bool, string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.live && p.healthy, ""
}

// withPeer gives the syncer a fake kube-proxy, checked every second, and
// records the hand-overs.
func withPeer(p *fakePeer) func(*harness, *Config) {
	return func(h *harness, c *Config) {
		p.h = h
		c.Peer, c.PeerCheckInterval, c.PeerGoneAfter = p, time.Second, time.Second
		c.OnHandover = func(back bool) {
			if back {
				h.record("handed to kube-proxy")
			} else {
				h.record("taken back from kube-proxy")
			}
		}
	}
}

// TestTakeOverFromAStoppedKubeProxy: kube-proxy stopped with its rules
// left: this agent programs first, then removes them (a full sync after,
// as the iptables mode asks), retrying while that fails, and never again.
func TestTakeOverFromAStoppedKubeProxy(t *testing.T) {
	p := &fakePeer{adoptFails: 1}
	h := newHarness(t, nil, false, withPeer(p))
	if _, err := h.s.Apply(t.Context(), update("s1", svc("ns/a", "1"))); err != nil {
		t.Fatal(err)
	}
	// Adopt runs after the sync answered Apply.
	h.waitFor("the first attempt, refused", func() bool { return len(h.calls()) == 2 })
	p.check("retried: kube-proxy stopped meanwhile")
	h.waitFor("the full sync asked for", func() bool { return len(h.calls()) == 4 })
	p.check("nothing more to do")
	h.wantCalls(t, []string{
		"DATAPLANE_MODE_DRY_RUN apply full=true", "adopt kube-proxy's leftovers, forwarding with DATAPLANE_MODE_DRY_RUN",
		"adopt kube-proxy's leftovers, forwarding with DATAPLANE_MODE_DRY_RUN", "DATAPLANE_MODE_DRY_RUN apply full=true",
	})
}

// TestHandOver: kube-proxy running when the agent starts keeps the node:
// the agent follows the view without writing a rule; once kube-proxy
// stopped (its health silent for PeerGoneAfter) the agent takes over and removes its
// leftovers. When kube-proxy comes back (its rules appear again) the
// agent hands the node back, writes nothing more, and removes its own
// rules once kube-proxy says its rules are programmed; then takes it over
// again when kube-proxy stops.
func TestHandOver(t *testing.T) {
	p := &fakePeer{live: true, healthy: true}
	h := newHarness(t, nil, false, withPeer(p))
	if _, err := h.s.Apply(t.Context(), update("s1", svc("ns/a", "1"))); err != nil {
		t.Fatal(err)
	}
	if !h.s.Holding() {
		t.Error("not holding while kube-proxy runs")
	}
	h.wantCalls(t, []string{"handed to kube-proxy"})

	p.set(false, false, true) // kube-proxy stopped; its rules stay
	p.check("kube-proxy stopped, once")
	p.check("kube-proxy stopped, twice: taken over")
	// A full sync, kube-proxy's rules removed, the full sync that asks for.
	h.waitFor("taken over", func() bool { return len(h.calls()) == 5 })

	p.set(true, false, true) // kube-proxy back: its canary reappears
	p.check("kube-proxy's rules are back")
	h.waitFor("handed back", func() bool { return len(h.calls()) == 6 })
	if _, err := h.s.Apply(t.Context(), update("s2", svc("ns/a", "2"))); err != nil {
		t.Fatal(err)
	}
	p.check("kube-proxy not healthy yet")
	p.set(true, true, true)
	p.check("kube-proxy healthy")
	h.waitFor("own rules removed", func() bool { return len(h.calls()) == 7 })
	h.wantCalls(t, []string{
		"handed to kube-proxy",
		"taken back from kube-proxy", "DATAPLANE_MODE_DRY_RUN apply full=true",
		"adopt kube-proxy's leftovers, forwarding with DATAPLANE_MODE_DRY_RUN", "DATAPLANE_MODE_DRY_RUN apply full=true",
		"handed to kube-proxy",
		"DATAPLANE_MODE_DRY_RUN cleanup full=false",
	})
}

// TestKubeProxyRulesAtStart: kube-proxy's rules in the kernel while its
// health port is silent may be a kube-proxy just starting: the agent
// hands it the node and takes over only once the port stayed silent; a
// kube-proxy that shows itself meanwhile keeps the node, and what this
// agent's modes left (an agent restarted during a hand-back) goes once it
// is healthy.
func TestKubeProxyRulesAtStart(t *testing.T) {
	// Two checks' worth of silence from the agent's start.
	goneAfter := func(_ *harness, c *Config) { c.PeerGoneAfter = 2 * time.Second }
	t.Run("leftovers of a stopped kube-proxy", func(t *testing.T) {
		p := &fakePeer{returned: true}
		h := newHarness(t, nil, false, withPeer(p), goneAfter)
		h.waitFor("holding with kube-proxy's rules on the node", h.s.Holding)
		p.check("silent once")
		p.check("silent for PeerGoneAfter: taken over")
		h.waitFor("taken over and kube-proxy's rules removed", func() bool { return len(h.calls()) == 5 })
		h.wantCalls(t, []string{"handed to kube-proxy", "taken back from kube-proxy", "DATAPLANE_MODE_DRY_RUN apply full=true",
			"adopt kube-proxy's leftovers, forwarding with DATAPLANE_MODE_DRY_RUN", "DATAPLANE_MODE_DRY_RUN apply full=true"})
	})
	t.Run("a kube-proxy just starting", func(t *testing.T) {
		p := &fakePeer{returned: true}
		h := newHarness(t, nil, false, withPeer(p), goneAfter, func(h *harness, c *Config) {
			c.CleanOthers = func(_ context.Context, keep switchyardv1.DataplaneMode) error {
				h.record("clean every mode but " + keep.String())
				return nil
			}
		})
		p.check("silent once")
		p.set(true, true, true) // kube-proxy bound its port and synced
		p.check("kube-proxy healthy")
		h.waitFor("this agent's leftovers removed", func() bool { return len(h.calls()) == 2 })
		h.wantCalls(t, []string{"handed to kube-proxy", "clean every mode but DATAPLANE_MODE_UNSPECIFIED"})
	})
}

// TestDriftFromKubeProxyIsNotRepaired: kube-proxy starting again rewrites
// the rules it shares with the agent; the drift check that sees it hands
// the node to kube-proxy instead of writing the rules back, which would
// take them from it.
func TestDriftFromKubeProxyIsNotRepaired(t *testing.T) {
	p := &fakePeer{}
	var dp *drifting
	h := newHarness(t, nil, false, withPeer(p), withDrift(10*time.Second, true, &dp), func(_ *harness, c *Config) {
		c.PeerCheckInterval = time.Hour // only the drift check looks
	})
	if _, err := h.s.Apply(t.Context(), update("s1", svc("ns/a", "1"))); err != nil {
		t.Fatal(err)
	}
	h.waitFor("kube-proxy's leftovers adopted", func() bool { return len(h.calls()) == 3 })
	p.set(true, false, true) // kube-proxy starts: its canary back, its rules over ours
	var found dataplane.Drift
	found.Add(dataplane.DriftChain, "KUBE-SERVICES")
	dp.set(found)
	h.fire("drift check armed", 10*time.Second)
	h.waitFor("handed to kube-proxy", h.s.Holding)
	h.wantCalls(t, []string{"DATAPLANE_MODE_DRY_RUN apply full=true", "adopt kube-proxy's leftovers, forwarding with DATAPLANE_MODE_DRY_RUN",
		"DATAPLANE_MODE_DRY_RUN apply full=true", "handed to kube-proxy"})
}
