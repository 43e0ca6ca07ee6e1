package system_test

import (
	"context"
	"fmt"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/switchyard-proxy/switchyard/e2e/system"
	"github.com/switchyard-proxy/switchyard/e2e/testbed/netns"
	"github.com/switchyard-proxy/switchyard/e2e/testbed/probe"
	switchyardv1 "github.com/switchyard-proxy/switchyard/proto/switchyard/v1"
)

// Traffic kept flowing to the cluster's VIP while processes are killed:
// 100 new connections a second for 20 s from the client, through node-0.
const (
	streamRate     = 100
	streamDuration = 20 * time.Second
	// faultAfter is when, into the stream, the fault is injected: a
	// schedule, not a wait for a condition.
	faultAfter = 3 * time.Second
)

// stream is the bounded stream of connections running in the background.
type stream struct {
	rate int
	dur  time.Duration
	done chan struct{}
	res  probe.Result
	err  error
}

func (e *env) startStream(ctx context.Context) *stream {
	return e.startStreamAt(ctx, streamRate, streamDuration)
}

// startStreamAt starts rate new connections a second for d from the
// client to the cluster's VIP, through node-0.
func (e *env) startStreamAt(ctx context.Context, rate int, d time.Duration) *stream {
	return e.startStreamTo(ctx, e.c.VIP(), rate, d)
}

// startStreamTo starts rate new connections a second for d from the
// client to addr, through node-0.
func (e *env) startStreamTo(ctx context.Context, addr netip.AddrPort, rate int, d time.Duration) *stream {
	s := &stream{rate: rate, dur: d, done: make(chan struct{})}
	go func() {
		defer close(s.done)
		s.res, s.err = probe.New(e.c.Topo, e.c.Topo.Client().NS).Stream(ctx, addr,
			probe.StreamOptions{Rate: rate, Duration: d, Timeout: 2 * time.Second})
	}()
	return s
}

// check waits for the stream's end and fails t unless every connection
// succeeded.
func (s *stream) check(t *testing.T, scenario string) {
	t.Helper()
	<-s.done
	if s.err != nil {
		t.Fatalf("stream: %v", s.err)
	}
	t.Logf("stream scenario=%s %v", scenario, s.res)
	// A loaded machine drops ticks (time.Ticker), so fewer than
	// rate × duration attempts may be made; half is plenty to prove the point.
	if len(s.res.Failures) > 0 || s.res.Skipped > 0 || s.res.Attempts < s.rate*int(s.dur/time.Second)/2 {
		t.Errorf("%s: want every connection of the stream to succeed: %v", scenario, s.res)
	}
}

// resumeCounts reads the delta resume counter of replica i.
func resumeCounts(ctx context.Context, t *testing.T, c *system.Cluster, i int) (resumed, sent float64) {
	t.Helper()
	m, err := c.ControlPlaneMetrics(ctx, i)
	if err != nil {
		t.Fatal(err)
	}
	const name = "switchyard_controlplane_delta_initial_resources_total"
	return m[name+`{outcome="resumed"}`], m[name+`{outcome="sent"}`]
}

// reconnected says whether a node's agent acknowledged, on a stream opened
// after since, the version the control plane wants.
func reconnected(since time.Time) func(_, now *switchyardv1.NodeStatus) bool {
	return func(_, now *switchyardv1.NodeStatus) bool {
		return now.GetConnected() && now.GetConnectedSince().AsTime().After(since) &&
			now.GetAckedVersion() == now.GetDesiredVersion() && !now.GetLastAckTime().AsTime().Before(since)
	}
}

// TestRestarts kills processes of one cluster (one control-plane replica)
// with SIGKILL under a stream of connections.
func TestRestarts(t *testing.T) {
	e := &env{c: startCluster(t, system.Config{Nodes: 2, Pods: 3})}
	t.Run("ControlPlaneKill9", func(t *testing.T) { testControlPlaneKill(t, e) })
	t.Run("AgentKill9", func(t *testing.T) { testAgentKill(t, e) })
}

// testControlPlaneKill: kill -9 the only replica; while it is gone the
// Service loses pod-2 in the API; bring it back. Traffic never fails (the
// agents keep their rules), both agents reconnect with their versions and
// the new process sends only the one changed Service per node: its delta
// counter shows everything else resumed.
func testControlPlaneKill(t *testing.T, e *env) {
	ctx := t.Context()
	nodes, err := e.nodes(ctx)
	if err != nil {
		t.Fatal(err)
	}
	total := 0
	for _, n := range nodes {
		total += int(n.GetResourceCount())
	}
	st := e.startStream(ctx)
	time.Sleep(faultAfter) // schedule of the fault, not a wait for a condition
	if err := e.c.KillControlPlane(0); err != nil {
		t.Fatal(err)
	}
	pods := e.c.Topo.Pods()
	if err := e.c.ScaleTo(ctx, pods[:2]); err != nil {
		t.Fatal(err)
	}
	restart := time.Now()
	e.measure(t, change{
		scenario: "controlplane-restart",
		write:    func(ctx context.Context) error { return e.c.RestartControlPlane(ctx, 0) },
		reached: func(ctx context.Context, n netns.Node) (bool, string) {
			res, err := e.tcp(ctx, n.NS, e.c.VIP(), 24)
			return err == nil && answeredBy(res, names(pods[:2]...)...), fmt.Sprint(res, err)
		},
		acked: reconnected(restart),
	})
	st.check(t, "controlplane-restart")
	resumed, sent := resumeCounts(ctx, t, e.c, 0)
	t.Logf("after restart: delta_initial_resources_total resumed=%v sent=%v (resources before: %d)", resumed, sent, total)
	if want := float64(len(e.c.Topo.Nodes())); sent != want || resumed != float64(total)-want {
		t.Errorf("reconnect: resumed=%v sent=%v, want resumed=%d sent=%v (only the Service changed while the control plane was down)",
			resumed, sent, total-int(want), want)
	}
}

// saveCounters returns node's rules from `iptables-save -c`, each with its
// packet counter, keyed by table, rule and occurrence.
func (e *env) saveCounters(ctx context.Context, n netns.Node) (map[string]uint64, error) {
	out, err := e.c.Topo.Exec(ctx, n.NS, "iptables-save", "-c")
	if err != nil {
		return nil, err
	}
	rules := map[string]uint64{}
	table := ""
	for line := range strings.SplitSeq(string(out), "\n") {
		if strings.HasPrefix(line, "*") {
			table = line[1:]
			continue
		}
		var pkts, bytes uint64
		rest, ok := strings.CutPrefix(line, "[")
		if !ok {
			continue
		}
		i := strings.Index(rest, "] ")
		if i < 0 {
			continue
		}
		if _, err := fmt.Sscanf(rest[:i], "%d:%d", &pkts, &bytes); err != nil {
			return nil, fmt.Errorf("parse %q: %w", line, err)
		}
		key := table + " " + rest[i+2:]
		for k := 1; ; k++ {
			if _, dup := rules[key+fmt.Sprintf(" #%d", k)]; !dup {
				rules[key+fmt.Sprintf(" #%d", k)] = pkts
				break
			}
		}
	}
	return rules, nil
}

// testAgentKill: kill -9 node-0's agent (the client's gateway) and start it
// again with its state directory. Traffic never fails, and the restarted
// agent reconciles without flushing: no rule disappears or changes, and no
// packet counter goes back.
func testAgentKill(t *testing.T, e *env) {
	ctx := t.Context()
	node := e.c.Topo.Node(0)
	all := func(ctx context.Context, n netns.Node) (bool, string) {
		res, err := e.tcp(ctx, n.NS, e.c.VIP(), 24)
		return err == nil && answeredBy(res, names(e.c.Topo.Pods()...)...), fmt.Sprint(res, err)
	}
	e.measure(t, change{
		scenario: "scale-back-up",
		write:    func(ctx context.Context) error { return e.c.ScaleTo(ctx, e.c.Topo.Pods()) },
		reached:  all,
	})
	st := e.startStream(ctx)
	time.Sleep(faultAfter) // schedule of the fault, not a wait for a condition
	before, err := e.saveCounters(ctx, node)
	if err != nil {
		t.Fatal(err)
	}
	if err := e.c.KillAgent(0); err != nil {
		t.Fatal(err)
	}
	restart := time.Now()
	e.measure(t, change{
		scenario: "agent-restart",
		write:    func(context.Context) error { return e.c.RestartAgent(0) },
		reached:  all,
		acked:    reconnected(restart),
		nodes:    []netns.Node{node},
	})
	after, err := e.saveCounters(ctx, node)
	if err != nil {
		t.Fatal(err)
	}
	st.check(t, "agent-restart")
	keptCounters(t, "agent restart", before, after, keepAll)
}

// keepCheck selects what keptCounters asserts of a restart: newRules, that
// no rule appears (a restart that adds nothing); counter, whether a rule's
// packet counter must not go back (nil: every rule's).
type keepCheck struct {
	newRules bool
	counter  func(rule string) bool
}

var keepAll = keepCheck{newRules: true}

// keptCounters checks `iptables-save -c` of one node before and after a
// restart: no rule disappears or changes, no selected packet counter goes
// back (a rewritten rule starts at 0), and with check.newRules no rule is
// new. At least three rules must have carried traffic before, or the
// check proves nothing.
func keptCounters(t *testing.T, what string, before, after map[string]uint64, check keepCheck) {
	t.Helper()
	counted, gone, reset := 0, 0, 0
	for rule, was := range before {
		now, ok := after[rule]
		switch {
		case !ok:
			gone++
			t.Errorf("%s: rule gone: %s", what, rule)
		case now < was && (check.counter == nil || check.counter(rule)):
			reset++
			t.Errorf("%s: packet counter went back from %d to %d (rule rewritten): %s", what, was, now, rule)
		case was > 0:
			counted++
		}
	}
	added := 0
	for rule := range after {
		if _, ok := before[rule]; !ok {
			added++
			if check.newRules {
				t.Errorf("%s: rule new after the restart: %s", what, rule)
			}
		}
	}
	t.Logf("%s: %d rules before, %d with traffic; after: %d gone, %d counters reset, %d new", what, len(before), counted, gone, reset, added)
	if counted < 3 {
		t.Errorf("%s: only %d rules carried traffic before; the check proves nothing", what, counted)
	}
}

// TestControlPlaneFailover runs two control-plane replicas; agents list
// both (comma-separated) and use the first. Killing it with SIGKILL under a
// stream of connections: traffic never fails, agents move to the other
// replica resuming their versions (nothing resent), and changes made after
// the failover reach them.
func TestControlPlaneFailover(t *testing.T) {
	c := startCluster(t, system.Config{Nodes: 2, Pods: 3, ControlPlanes: 2})
	ctx := t.Context()
	for i := range 2 {
		list, err := c.ListNodesAt(ctx, i)
		if err != nil {
			t.Fatal(err)
		}
		for _, n := range list {
			if n.GetConnected() != (i == 0) {
				t.Fatalf("replica %d: node %s connected=%t; agents should use the first address", i, n.GetName(), n.GetConnected())
			}
		}
	}
	e := &env{c: c, replica: 1}
	st := e.startStream(ctx)
	time.Sleep(faultAfter) // schedule of the fault, not a wait for a condition
	kill := time.Now()
	if err := c.KillControlPlane(0); err != nil {
		t.Fatal(err)
	}
	e.measure(t, change{
		scenario: "failover",
		write:    func(context.Context) error { return nil },
		reached: func(ctx context.Context, n netns.Node) (bool, string) {
			res, err := e.tcp(ctx, n.NS, c.VIP(), 24)
			return err == nil && answeredBy(res, names(c.Topo.Pods()...)...), fmt.Sprint(res, err)
		},
		acked: reconnected(kill),
	})
	resumed, sent := resumeCounts(ctx, t, c, 1)
	t.Logf("after failover: replica 1 delta_initial_resources_total resumed=%v sent=%v", resumed, sent)
	if resumed == 0 || sent != 0 {
		t.Errorf("failover: resumed=%v sent=%v, want every resource resumed and none sent", resumed, sent)
	}
	only := c.Topo.Pods()[1]
	e.measure(t, change{
		scenario: "after-failover-scale-down",
		write:    func(ctx context.Context) error { return c.ScaleTo(ctx, []netns.Pod{only}) },
		reached: func(ctx context.Context, n netns.Node) (bool, string) {
			res, err := e.tcp(ctx, n.NS, c.VIP(), 24)
			return err == nil && answeredBy(res, only.Name), fmt.Sprint(res, err)
		},
	})
	st.check(t, "failover")
}
