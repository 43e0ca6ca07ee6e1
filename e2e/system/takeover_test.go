package system_test

import (
	"errors"
	"fmt"
	"net/netip"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/switchyard-proxy/switchyard/e2e/compare"
	"github.com/switchyard-proxy/switchyard/e2e/system"
	"github.com/switchyard-proxy/switchyard/e2e/testbed/echo"
	"github.com/switchyard-proxy/switchyard/e2e/testbed/netns"
	"github.com/switchyard-proxy/switchyard/e2e/testbed/probe"
	eps "github.com/switchyard-proxy/switchyard/e2e/testbed/slices"
)

// The takeover's Service: a NodePort Service with a port per kind of
// traffic (takeover_traffic_test.go), its pods answering on
// system.TargetPort (name, then close) and takeoverEchoPort (echo, TCP
// and UDP, started here).
const (
	takeoverNS       = "takeover"
	takeoverIP       = "10.96.5.10"
	takeoverEchoPort = 8081
)

// The takeover's schedule: not waits for conditions, but how long each
// stretch lasts so that traffic crosses it.
const (
	// takeoverWarmup is the load through kube-proxy alone.
	takeoverWarmup = 2 * time.Second
	// takeoverGap: kube-proxy stopped, no agent yet (between the two
	// DaemonSets), its rules only.
	takeoverGap = time.Second
	// takeoverHold: kube-proxy keeps running after the agent acked,
	// longer than two of the agent's looks at it (every 2 s).
	takeoverHold = 4 * time.Second
	// takeoverTail is the load through Switchyard alone.
	takeoverTail = 3 * time.Second
	// takeoverCleanTimeout bounds the wait for kube-proxy's leftovers to
	// go: the agent takes kube-proxy for stopped after 12 s of silence
	// and looks every 2 s; the long-lived connections' pods close them
	// after 30 s.
	takeoverCleanTimeout = 20 * time.Second
)

// takeoverPairs: kube-proxy's mode, then the agent's.
var takeoverPairs = []struct{ from, to string }{
	{"iptables", "iptables"}, {"nftables", "nftables"}, {"iptables", "nftables"}, {"nftables", "iptables"},
}

// takeoverTimes are when a takeover's steps happened.
type takeoverTimes struct {
	kubeProxyStop, agentStart, acked, clean time.Time
}

// takeoverScenario is how kube-proxy leaves: run drives the takeover,
// marking its phases on tl, and returns once kube-proxy's leftovers are
// gone (or the wait for it failed t); handsOver says whether the agent
// meets a running kube-proxy, hands the node to it and takes it back.
type takeoverScenario struct {
	name      string
	handsOver bool
	run       func(t *testing.T, b *takeoverBed, kp *system.KubeProxy, to string, tl *timeline) takeoverTimes
}

// Both hand the node over: an agent that finds kube-proxy's rules at its
// start waits until kube-proxy's health port stayed silent, since a
// kube-proxy that is starting looks like a stopped one's leftovers until
// it binds the port.
var takeoverScenarios = []takeoverScenario{
	{"KubeProxyStoppedFirst", true, takeoverAfterStop},
	{"KubeProxyStillRunning", true, takeoverWhileRunning},
}

// TestKubeProxyTakeover replaces upstream kube-proxy by Switchyard on
// node-0 (the client's gateway) under traffic, for each pair of modes:
// kube-proxy runs alone in node-0's namespace until it forwards, then
// either stops first (its rules stay) and the agent starts with
// --cleanup-kube-proxy, or the agent starts while it still runs and it
// stops a few seconds later (its DaemonSet deleted a moment after
// Switchyard's rolled out). Throughout, no new connection fails, no
// long-lived one breaks and the UDP flow never misses two datagrams in a
// row; kube-proxy's rules stay while it runs, and once it has stopped
// nothing of it is left: node-0 holds exactly what a clean install of
// the agent's mode holds (every iptables back end and family, nftables
// tables).
//
// Needs root, the test bed and upstream kube-proxy (`BUILD_KUBE_PROXY=1
// hack/testbed-build.sh`); skips without them unless CI is set.
func TestKubeProxyTakeover(t *testing.T) {
	bin := requireKubeProxy(t)
	e := &env{c: startCluster(t, system.Config{Nodes: 2, Pods: 3})}
	b := newTakeoverBed(t, e, bin)
	for _, sc := range takeoverScenarios {
		t.Run(sc.name, func(t *testing.T) {
			for _, p := range takeoverPairs {
				t.Run(p.from+"-to-"+p.to, func(t *testing.T) { b.run(t, sc, p.from, p.to) })
			}
		})
	}
}

// requireKubeProxy returns upstream kube-proxy's binary; without it (or
// root) the test skips, or fails when CI is set.
func requireKubeProxy(t *testing.T) string {
	t.Helper()
	netns.RequireRoot(t)
	bin, err := compare.KubeProxyPath()
	switch {
	case errors.Is(err, compare.ErrNoKubeProxy) && os.Getenv("CI") == "":
		t.Skipf("%v; %s", err, compare.KubeProxyHint)
	case err != nil:
		t.Fatalf("%v (CI=%q: not skipping); %s", err, os.Getenv("CI"), compare.KubeProxyHint)
	}
	return bin
}

// takeoverBed is the cluster, its takeover Service, the load's targets
// and node-0's rules under each mode of the agent alone (baseline).
type takeoverBed struct {
	e           *env
	bin         string
	node        netns.Node
	conns, long []loadTarget
	udp         netip.AddrPort
	baseline    map[string]ruleSnapshot
}

// newTakeoverBed starts the echoing servers, creates the Service and
// reads node-0's rules under the agent's iptables mode (as the cluster
// started) and then its nftables mode.
func newTakeoverBed(t *testing.T, e *env, bin string) *takeoverBed {
	s := e.loadService(t, takeoverNS, takeoverIP)
	node := e.c.Topo.Node(0)
	b := &takeoverBed{e: e, bin: bin, node: node, udp: s.vip(2),
		conns:    []loadTarget{{name: "ClusterIP", addr: s.vip(0)}, {name: "NodePort", addr: s.nodePort(node, 0)}},
		long:     []loadTarget{{name: "ClusterIP", addr: s.vip(1)}, {name: "NodePort", addr: s.nodePort(node, 1)}},
		baseline: map[string]ruleSnapshot{},
	}
	b.waitForwards(t, "Switchyard's iptables mode")
	incremental := b.snapshot(t)
	// The takeover's agent starts on a bare node with an empty state
	// directory: its first sync is a full one of the whole view. Each
	// baseline is the same: the agent, on a bare node-0, alone.
	for _, mode := range []string{"iptables", "nftables"} {
		b.reset(t)
		restart := time.Now()
		if err := e.c.RestartAgentAs(0, mode); err != nil {
			t.Fatal(err)
		}
		b.waitAcked(t, restart, mode)
		b.waitForwards(t, "Switchyard's "+mode+" mode")
		b.baseline[mode] = b.snapshot(t)
		t.Logf("baseline of %s under the agent's %s mode alone: %d KUBE- lines, tables %q", node.Name, mode, len(b.baseline[mode].lines), b.baseline[mode].tables)
	}
	// Not under test here, but telling when a baseline looks odd: the
	// rules the cluster's agent reached change by change.
	if extra, missing := incremental.against(b.baseline["iptables"]); len(extra)+len(missing) > 0 {
		t.Logf("note: the iptables rules reached change by change differ from a first sync's of the same view:\nonly incremental:\n%s\nonly first sync:\n%s",
			strings.Join(extra, "\n"), strings.Join(missing, "\n"))
	}
	return b
}

// loadService starts the echoing servers in every pod and creates the
// load's Service (ns, cluster IP ip): a NodePort Service with a port
// per kind of traffic, "http" (name, then close), "stream" (echo, for
// the long-lived connections) and "flow" (UDP echo).
func (e *env) loadService(t *testing.T, ns, ip string) *svc {
	t.Helper()
	ctx := t.Context()
	pods := e.c.Topo.Pods()
	if _, err := echo.StartPods(ctx, echo.Launcher{Topo: e.c.Topo}, pods, echo.Config{
		TCP: fmt.Sprint(":", takeoverEchoPort), UDP: fmt.Sprint(":", takeoverEchoPort), Mode: echo.ModeEcho}); err != nil {
		t.Fatal(err)
	}
	s := e.createService(t, ns, corev1.ServiceSpec{Type: corev1.ServiceTypeNodePort, ClusterIP: ip,
		Ports: []corev1.ServicePort{
			{Name: "http", Protocol: corev1.ProtocolTCP, Port: 80},
			{Name: "stream", Protocol: corev1.ProtocolTCP, Port: 81},
			{Name: "flow", Protocol: corev1.ProtocolUDP, Port: 53},
		}}, eps.TCP("http", system.TargetPort), eps.TCP("stream", takeoverEchoPort), eps.UDP("flow", takeoverEchoPort))
	if err := e.write(ctx, s, e.endpoints(pods...)...); err != nil {
		t.Fatal(err)
	}
	e.settled(t, ns+"-service")
	return s
}

// waitForwards waits until every target, and the UDP port, answers the
// client from every pod (via names what forwards, for the message).
func (b *takeoverBed) waitForwards(t *testing.T, via string) {
	t.Helper()
	ctx := t.Context()
	client := b.e.c.Topo.Client().NS
	all := names(b.e.c.Topo.Pods()...)
	for _, tg := range slices.Concat(b.conns, b.long) {
		waitFor(ctx, t, "the client reaches "+tg.name+" "+tg.addr.String()+" through "+via, func() (bool, string) {
			res, err := b.e.tcp(ctx, client, tg.addr, 12)
			return err == nil && answeredBy(res, all...), fmt.Sprint(res, err)
		})
	}
	waitFor(ctx, t, "the client reaches UDP "+b.udp.String()+" through "+via, func() (bool, string) {
		res, err := probe.New(b.e.c.Topo, client).UDP(ctx, b.udp, probe.Options{Count: 12, Parallel: 4, DistinctSources: true})
		return err == nil && answeredBy(res, all...), fmt.Sprint(res, err)
	})
}

// waitAcked waits until node-0's agent, started at start, runs mode
// and acknowledged the control plane's view; it returns when it saw so.
func (b *takeoverBed) waitAcked(t *testing.T, start time.Time, mode string) time.Time {
	t.Helper()
	ctx := t.Context()
	waitFor(ctx, t, b.node.Name+" acks in "+mode+" mode", func() (bool, string) {
		now, err := b.e.nodes(ctx)
		if err != nil {
			return false, err.Error()
		}
		m, desc := b.e.agentMode(ctx, b.node.Name)
		return reconnected(start)(nil, now[b.node.Name]) && m == modes[mode], desc
	})
	return time.Now()
}

// reset stops node-0's agent and removes everything of Switchyard's and
// kube-proxy's from node-0 (`switchyard-agent --cleanup
// --cleanup-kube-proxy`) and the conntrack entries no rule translated,
// so that every run starts from a bare node.
func (b *takeoverBed) reset(t *testing.T) {
	t.Helper()
	if err := b.e.c.KillAgent(0); err != nil {
		t.Fatal(err)
	}
	if out, err := b.e.c.RunAgentCleanup(t.Context(), 0, "--cleanup-kube-proxy"); err != nil {
		t.Fatalf("--cleanup --cleanup-kube-proxy: %v\n%s", err, out)
	}
	if s := b.snapshot(t); len(s.lines) > 0 || len(s.proxyTables()) > 0 {
		t.Fatalf("%s not bare after --cleanup: %q %q", b.node.Name, s.lines, s.proxyTables())
	}
	b.forgetUntranslated(t)
}

// forgetUntranslated deletes node-0's conntrack entries to the Service's
// cluster IP that no rule translated (their reply comes from the cluster
// IP itself). A SYN sent while no rule matched (a probe before a proxy's
// first sync, the gap of a failed run) leaves one in SYN_SENT for 120 s,
// and a later connection from the same client port is taken for its
// retransmission: never translated, lost. Only those go: deleting the
// translated ones too would free masquerade ports that the pods' sockets
// still hold in TIME_WAIT, and a new connection given one would meet an
// ACK of the old one, and time out.
func (b *takeoverBed) forgetUntranslated(t *testing.T) {
	t.Helper()
	// conntrack exits 1 when it found nothing to delete.
	if _, err := b.e.c.Topo.Exec(t.Context(), b.node.NS, "conntrack", "-D", "-d", takeoverIP, "-r", takeoverIP); err != nil &&
		!strings.Contains(err.Error(), "0 flow entries") {
		t.Fatalf("conntrack -D -d %s -r %s: %v", takeoverIP, takeoverIP, err)
	}
}

// startKubeProxy runs kube-proxy in mode on the bare node-0 until it
// forwards every target, and checks that its evidence (canary chains or
// table) is there.
func (b *takeoverBed) startKubeProxy(t *testing.T, mode string) *system.KubeProxy {
	t.Helper()
	start := time.Now()
	kp := b.runKubeProxy(t, mode)
	synced := time.Since(start)
	b.waitForwards(t, "kube-proxy's "+mode+" mode")
	s := b.snapshot(t)
	if len(s.kubeProxy()) == 0 {
		t.Fatalf("kube-proxy (%s) forwards but left no evidence: %q %q", mode, s.lines, s.tables)
	}
	t.Logf("kube-proxy %s (pid %d) synced in %v; %d KUBE- lines, tables %q, evidence %q",
		mode, kp.Pid(), synced.Round(time.Millisecond), len(s.lines), s.tables, s.kubeProxy())
	return kp
}

// runKubeProxy runs kube-proxy in mode on node-0 until it synced, and
// stops it when t ends.
func (b *takeoverBed) runKubeProxy(t *testing.T, mode string) *system.KubeProxy {
	t.Helper()
	ctx := t.Context()
	kp, err := b.e.c.StartKubeProxy(0, b.bin, mode)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := kp.Stop(); err != nil {
			t.Errorf("stop kube-proxy: %v", err)
		}
		if t.Failed() {
			t.Logf("kube-proxy log (tail):\n%s", lastLines(kp.Log(), 40))
		}
	})
	waitFor(ctx, t, "kube-proxy synced", func() (bool, string) {
		ok, detail, err := kp.Synced(ctx)
		if err != nil {
			t.Fatalf("kube-proxy: %v", err)
		}
		return ok, detail
	})
	return kp
}

// run is one takeover: a bare node-0, kube-proxy in from mode, the load,
// the scenario, then the checks.
func (b *takeoverBed) run(t *testing.T, sc takeoverScenario, from, to string) {
	b.reset(t)
	kp := b.startKubeProxy(t, from)
	logFrom := len(b.e.c.AgentLogs(0))
	ld := b.e.startLoad(t, b.conns, b.long, b.udp)
	tl := timeline{{name: "kube-proxy alone", from: ld.start}}
	time.Sleep(takeoverWarmup) // schedule, not a wait for a condition
	tt := sc.run(t, b, kp, to, &tl)
	time.Sleep(takeoverTail) // schedule, not a wait for a condition
	ld.stop()
	end := time.Now()
	log := agentLines(b.e.c.AgentLogs(0)[logFrom:])
	t.Logf("agent log on kube-proxy and its ports:\n%s", strings.Join(log, "\n"))
	b.report(t, ld, tl, tt, end)
	ld.check(t, end.Sub(ld.start))
	b.checkLog(t, sc.handsOver, log, tt)
	b.checkLeft(t, to)
}

// takeoverAfterStop: kube-proxy stops (SIGTERM; its rules stay), a
// moment without any proxy, then the agent starts with
// --cleanup-kube-proxy: it leaves the node to kube-proxy's rules until
// kube-proxy's health port stayed silent, then programs it and removes
// them.
func takeoverAfterStop(t *testing.T, b *takeoverBed, kp *system.KubeProxy, to string, tl *timeline) takeoverTimes {
	var tt takeoverTimes
	tl.mark("kube-proxy stopped, its rules left")
	tt.kubeProxyStop = time.Now()
	if err := kp.Stop(); err != nil {
		t.Fatal(err)
	}
	time.Sleep(takeoverGap) // schedule, not a wait for a condition
	tt.agentStart = b.startAgent(t, to, tl, "agent starting")
	tt.acked = b.waitAcked(t, tt.agentStart, to)
	tl.mark("agent acked, kube-proxy's leftovers pending")
	tt.clean = b.waitClean(t, to)
	tl.mark("Switchyard alone")
	return tt
}

// takeoverWhileRunning: the agent starts with --cleanup-kube-proxy while
// kube-proxy runs (and holds the ports 10256 and 10249 the agent serves
// too): it hands the node to kube-proxy and writes no rule; kube-proxy's
// rules must stay until it stops, takeoverHold after the agent acked,
// and go after (the agent takes kube-proxy for stopped after 12 s of
// silence).
func takeoverWhileRunning(t *testing.T, b *takeoverBed, kp *system.KubeProxy, to string, tl *timeline) takeoverTimes {
	var tt takeoverTimes
	tt.agentStart = b.startAgent(t, to, tl, "agent starting, kube-proxy running")
	tt.acked = b.waitAcked(t, tt.agentStart, to)
	tl.mark("agent acked, kube-proxy forwarding")
	b.holdWhileRunning(t)
	tl.mark("kube-proxy stopped, its rules left")
	tt.kubeProxyStop = time.Now()
	if err := kp.Stop(); err != nil {
		t.Fatal(err)
	}
	tt.clean = b.waitClean(t, to)
	tl.mark("Switchyard alone")
	return tt
}

// startAgent starts node-0's agent in mode with --cleanup-kube-proxy and
// marks phase on tl.
func (b *takeoverBed) startAgent(t *testing.T, mode string, tl *timeline, phase string) time.Time {
	t.Helper()
	tl.mark(phase)
	start := time.Now()
	if err := b.e.c.RestartAgentWith(0, mode, "--cleanup-kube-proxy"); err != nil {
		t.Fatal(err)
	}
	return start
}

// holdWhileRunning checks, every half second for takeoverHold, that
// kube-proxy's evidence is still on the node: the agent must leave the
// rules of a running kube-proxy, which would put them back anyway. It
// logs what of the agent's own the node held at the last check (its
// shard chains, its table): none while it leaves the node to kube-proxy.
func (b *takeoverBed) holdWhileRunning(t *testing.T) {
	t.Helper()
	until := time.Now().Add(takeoverHold)
	checks, ours := 0, []string(nil)
	for time.Now().Before(until) {
		s := b.snapshot(t)
		if len(s.kubeProxy()) == 0 {
			t.Errorf("kube-proxy's evidence gone while it runs (%v after the agent acked)", takeoverHold-time.Until(until))
		}
		ours = s.switchyard()
		checks++
		time.Sleep(500 * time.Millisecond) // the pace of the checks
	}
	t.Logf("kube-proxy's evidence present at each of %d checks over %v while both ran; the agent's own objects at the last: %d %q",
		checks, takeoverHold, len(ours), ours[:min(len(ours), 3)])
}

// waitClean waits until node-0 holds nothing beyond the agent's mode's
// baseline (no kube-proxy chain, rule or table), and returns when it saw
// so; the zero time when it did not within takeoverCleanTimeout.
func (b *takeoverBed) waitClean(t *testing.T, mode string) time.Time {
	t.Helper()
	err := pollEvery(t.Context(), takeoverCleanTimeout, 50*time.Millisecond, func() (bool, string) {
		extra, _ := b.snapshot(t).against(b.baseline[mode])
		return len(extra) == 0, fmt.Sprintf("%d left: %q", len(extra), extra)
	})
	if err != nil {
		t.Errorf("kube-proxy's leftovers not removed: %v", err)
		return time.Time{}
	}
	return time.Now()
}
