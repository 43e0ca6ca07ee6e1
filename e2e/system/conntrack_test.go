package system_test

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/switchyard-proxy/switchyard/e2e/system"
	"github.com/switchyard-proxy/switchyard/e2e/testbed/netns"
	eps "github.com/switchyard-proxy/switchyard/e2e/testbed/slices"
)

// The stale-UDP-flow scenarios of the conntrack reconciler: each is a UDP
// client that keeps one source port (one conntrack entry) while its
// Service changes in a way the modes' change-based cleanup
// (conntrack.Stale) cannot see. Each runs twice on one node: once with
// the reconciler off (--conntrack-reconcile-interval=0), the control,
// which must show the flow stuck on its old endpoint, and once with it
// on, where the flow must reach a live endpoint (or the port's REJECT)
// within 1 s of the reconcile that deleted its entry.
type ctScenario struct {
	name string
	run  func(t *testing.T, e *env, ct *ctRun)
}

var ctScenarios = []ctScenario{
	{"ScaledToZeroAndBack", testCTScaledToZero},
	{"EndpointRemovedWhileAgentStopped", testCTEndpointRemovedWhileStopped},
	{"ServiceDeletedAndRecreated", testCTServiceRecreated},
	// Last: it changes the control plane's --mode.
	{"ModeSwitch", testCTModeSwitch},
}

// ctRun is one scenario run: the reconciler on or off, its own namespace
// and cluster IP.
type ctRun struct {
	on   bool
	ns   string
	vip  string
	mode string // the mode the agent runs in at the start of the run
}

// TestConntrackReconcile runs the scenarios in the iptables mode.
func TestConntrackReconcile(t *testing.T) { runCTScenarios(t, modeIPTables) }

// TestConntrackReconcileNFTables runs the scenarios in the nftables mode
// (chosen by NodeConfig, as TestScenariosNFTables).
func TestConntrackReconcileNFTables(t *testing.T) { runCTScenarios(t, modeNFTables) }

func runCTScenarios(t *testing.T, mode string) {
	cfg := system.Config{Nodes: 1, Pods: 2}
	if mode == modeNFTables {
		cfg.Mode = mode
	}
	e := &env{c: startCluster(t, cfg), mode: mode}
	cur := mode
	for i, sc := range ctScenarios {
		for j, on := range []bool{false, true} {
			variant := "ReconcilerOff"
			if on {
				variant = "ReconcilerOn"
			}
			ct := &ctRun{on: on, ns: fmt.Sprintf("ct-%d-%d", i, j), vip: fmt.Sprintf("10.96.7.%d", 10*i+j+1), mode: cur}
			ok := t.Run(sc.name+"/"+variant, func(t *testing.T) {
				e.setReconciler(t, on)
				sc.run(t, e, ct)
			})
			if sc.name == "ModeSwitch" {
				cur = otherMode(cur)
			}
			if !ok && t.Context().Err() != nil {
				return
			}
		}
	}
}

func otherMode(m string) string {
	if m == modeNFTables {
		return modeIPTables
	}
	return modeNFTables
}

// setReconciler restarts node-0's agent (its state kept) with the
// reconciler on (the default interval) or off, and waits until it
// acknowledged what the control plane wants.
func (e *env) setReconciler(t *testing.T, on bool) {
	t.Helper()
	if on {
		e.c.SetAgentArgs(0)
	} else {
		e.c.SetAgentArgs(0, "--conntrack-reconcile-interval=0")
	}
	if err := e.c.KillAgent(0); err != nil {
		t.Fatal(err)
	}
	if err := e.c.RestartAgent(0); err != nil {
		t.Fatal(err)
	}
	e.settled(t, "conntrack-agent-restart")
}

// ctService creates ct's Service: one UDP port 53 to the pods' echo
// port, endpoints pods, and a flow from the client that reaches want.
func (e *env) ctService(t *testing.T, ct *ctRun, want netns.Pod) (*svc, *udpFlow) {
	t.Helper()
	s := e.createService(t, ct.ns, corev1.ServiceSpec{ClusterIP: ct.vip,
		Ports: []corev1.ServicePort{{Name: "dns", Protocol: corev1.ProtocolUDP, Port: 53}},
	}, eps.UDP("dns", system.TargetPort))
	if err := e.write(t.Context(), s, e.endpoints(want)...); err != nil {
		t.Fatal(err)
	}
	// The first endpoint makes the port active: the agent deletes the
	// port's entries, then ACKs. A flow opened before would lose its
	// entry (testUDPFlow).
	e.settled(t, ct.ns+"-programmed")
	f := e.openFlow(t, e.c.Topo.Client().NS, s.vip(0))
	waitFor(t.Context(), t, "the client's flow reaches "+want.Name, func() (bool, string) { return answers(f, want.Name) })
	return s, f
}

func answers(f *udpFlow, want string) (bool, string) {
	got, err := f.exchange()
	return err == nil && got == want, fmt.Sprintf("answer %q, err %v", got, err)
}

// wipeAgentState removes node-0's agent's persisted state (it must be
// stopped): its next start knows nothing of the view before, as on a
// node whose state file was lost or rejected, and its first sync is the
// control plane's view of now, whose difference from the kernel's no
// change-based cleanup sees.
func (e *env) wipeAgentState(t *testing.T) {
	t.Helper()
	dir := e.c.AgentStateDir(0)
	names, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range names {
		if err := os.RemoveAll(filepath.Join(dir, n.Name())); err != nil {
			t.Fatal(err)
		}
	}
}

// waitViewChanged waits until the control plane wants a new version on
// node-0 (it saw what the test wrote) while its agent is away.
func (e *env) waitViewChanged(t *testing.T, before string) {
	t.Helper()
	node := e.c.Topo.Node(0)
	waitFor(t.Context(), t, "the control plane changes "+node.Name+"'s view", func() (bool, string) {
		now, err := e.nodes(t.Context())
		if err != nil {
			return false, err.Error()
		}
		d := now[node.Name].GetDesiredVersion()
		return d != before, "desired " + short(d)
	})
}

func (e *env) desired(t *testing.T) string {
	t.Helper()
	now, err := e.nodes(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	return now[e.c.Topo.Node(0).Name].GetDesiredVersion()
}

// ctDeleted is node-0's agent's count of entries the reconciler deleted
// for reason (kubeproxy_conntrack_reconciler_deleted_entries_total).
func (e *env) ctDeleted(ctx context.Context, reason string) (float64, error) {
	out, err := e.c.Topo.Exec(ctx, e.c.Topo.Node(0).NS, "curl", "-sf", "http://127.0.0.1:10249/metrics")
	if err != nil {
		return 0, err
	}
	var sum float64
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		l := sc.Text()
		if strings.HasPrefix(l, "kubeproxy_conntrack_reconciler_deleted_entries_total{") && strings.Contains(l, `reason="`+reason+`"`) {
			if v, err := strconv.ParseFloat(l[strings.LastIndexByte(l, ' ')+1:], 64); err == nil {
				sum += v
			}
		}
	}
	return sum, nil
}

// afterReconcile checks the flow once the agent settled: with the
// reconciler on, it waits for the reconcile that deletes an entry for
// reason (the agent's counter above base: 0 for a process started
// since, its value before the change otherwise), then wants moved to hold of the flow within 1 s; off, it wants
// stuck to hold for 2 s, every 200 ms (the control: no reconcile, the
// entry stays).
func (e *env) afterReconcile(t *testing.T, ct *ctRun, reason string, base float64, f *udpFlow, moved, stuck func(got string, err error) bool) {
	t.Helper()
	ctx := t.Context()
	e.settled(t, ct.ns+"-settled")
	if !ct.on {
		deadline := time.Now().Add(2 * time.Second)
		for time.Now().Before(deadline) {
			got, err := f.exchange()
			if !stuck(got, err) {
				t.Fatalf("control: without the reconciler the flow should stay stale, got answer %q, err %v", got, err)
			}
			time.Sleep(200 * time.Millisecond) // the pace of the client, not a wait for a condition
		}
		t.Logf("control: the flow stayed stale for 2 s after the agent settled, as expected without the reconciler")
		return
	}
	waitFor(ctx, t, "the reconciler deletes an entry ("+reason+")", func() (bool, string) {
		n, err := e.ctDeleted(ctx, reason)
		return err == nil && n > base, fmt.Sprintf("%v deleted (before: %v), err %v", n, base, err)
	})
	seen := time.Now()
	var got string
	var err error
	for {
		got, err = f.exchange()
		if moved(got, err) {
			break
		}
		if time.Since(seen) > time.Second {
			t.Fatalf("the flow did not move within 1 s of the reconcile: answer %q, err %v", got, err)
		}
	}
	t.Logf("the flow moved %v after the reconcile was seen (answer %q, err %v)", time.Since(seen).Round(time.Millisecond), got, err)
}

func by(name string) func(string, error) bool {
	return func(got string, err error) bool { return err == nil && got == name }
}

// notBy holds while the flow gets no answer from name: refused (the
// port's REJECT) or unanswered.
func notBy(name string) func(string, error) bool {
	return func(got string, err error) bool { return err != nil || got != name }
}

// testCTScaledToZero: the Service is scaled to zero while the agent is
// stopped, and the agent starts without its state file (kubernetes#139628:
// the flow stays DNATed to the gone endpoint as long as the client
// sends, the port's REJECT never sees it). The reconciler deletes the
// entry (no_endpoints): the client is refused. Scaled back, the flow
// reaches the new endpoint (the change-based cleanup does that part).
func testCTScaledToZero(t *testing.T, e *env, ct *ctRun) {
	s, f := e.ctService(t, ct, e.pod(0))
	before := e.desired(t)
	if err := e.c.KillAgent(0); err != nil {
		t.Fatal(err)
	}
	if err := e.write(t.Context(), s); err != nil {
		t.Fatal(err)
	}
	e.waitViewChanged(t, before)
	if ok, last := answers(f, e.pod(0).Name); !ok {
		t.Fatalf("the agent's old rules should still forward while it is down: %s", last)
	}
	e.wipeAgentState(t)
	if err := e.c.RestartAgent(0); err != nil {
		t.Fatal(err)
	}
	e.afterReconcile(t, ct, "no_endpoints", 0, f, notBy(e.pod(0).Name), by(e.pod(0).Name))
	if err := e.write(t.Context(), s, e.endpoints(e.pod(1))...); err != nil {
		t.Fatal(err)
	}
	e.settled(t, ct.ns+"-back")
	acked := time.Now()
	waitFor(t.Context(), t, "the flow reaches "+e.pod(1).Name+" once scaled back", func() (bool, string) { return answers(f, e.pod(1).Name) })
	t.Logf("scaled back: the flow reached %s %v after the ACK", e.pod(1).Name, time.Since(acked).Round(time.Millisecond))
}

// testCTEndpointRemovedWhileStopped: pod-0 leaves the Service while the
// agent is stopped (pod-0 still answers, as a pod moved to another
// Service would), and the agent starts without its state file. The
// reconciler deletes the entry (endpoint_gone) and the flow reaches
// pod-1.
func testCTEndpointRemovedWhileStopped(t *testing.T, e *env, ct *ctRun) {
	s, f := e.ctService(t, ct, e.pod(0))
	before := e.desired(t)
	if err := e.c.KillAgent(0); err != nil {
		t.Fatal(err)
	}
	if err := e.write(t.Context(), s, e.endpoints(e.pod(1))...); err != nil {
		t.Fatal(err)
	}
	e.waitViewChanged(t, before)
	e.wipeAgentState(t)
	if err := e.c.RestartAgent(0); err != nil {
		t.Fatal(err)
	}
	e.afterReconcile(t, ct, "endpoint_gone", 0, f, by(e.pod(1).Name), by(e.pod(0).Name))
}

// testCTServiceRecreated: the Service is deleted while the agent is
// stopped, the agent starts without its state file (its cluster IP still
// DNATed to pod-0 by the entry: service_gone once reconciled), and the
// Service is created again with the same cluster IP and pod-1.
func testCTServiceRecreated(t *testing.T, e *env, ct *ctRun) {
	s, f := e.ctService(t, ct, e.pod(0))
	ctx := t.Context()
	before := e.desired(t)
	if err := e.c.KillAgent(0); err != nil {
		t.Fatal(err)
	}
	if err := e.c.API.Client().CoreV1().Services(s.Namespace).Delete(ctx, s.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := e.c.Slices.Delete(ctx, s.Namespace, s.Name, "a"); err != nil {
		t.Fatal(err)
	}
	e.waitViewChanged(t, before)
	e.wipeAgentState(t)
	if err := e.c.RestartAgent(0); err != nil {
		t.Fatal(err)
	}
	e.afterReconcile(t, ct, "service_gone", 0, f, notBy(e.pod(0).Name), by(e.pod(0).Name))
	again := e.createService(t, ct.ns, corev1.ServiceSpec{ClusterIP: ct.vip,
		Ports: []corev1.ServicePort{{Name: "dns", Protocol: corev1.ProtocolUDP, Port: 53}},
	}, eps.UDP("dns", system.TargetPort))
	if err := e.write(ctx, again, e.endpoints(e.pod(1))...); err != nil {
		t.Fatal(err)
	}
	e.settled(t, ct.ns+"-recreated")
	acked := time.Now()
	waitFor(ctx, t, "the flow reaches "+e.pod(1).Name+" through the re-created Service", func() (bool, string) { return answers(f, e.pod(1).Name) })
	t.Logf("re-created: the flow reached %s %v after the ACK", e.pod(1).Name, time.Since(acked).Round(time.Millisecond))
}

// testCTModeSwitch: while the control plane is down, pod-0 leaves the
// Service; the control plane comes back with the other --mode, so the
// running agent (its state kept) gets the endpoint change and the mode
// switch in one sync. The new mode's first sync cleans nothing and the
// old mode's Cleanup removes rules, not entries: only the reconciler
// (endpoint_gone) moves the flow to pod-1.
func testCTModeSwitch(t *testing.T, e *env, ct *ctRun) {
	s, f := e.ctService(t, ct, e.pod(0))
	to := otherMode(ct.mode)
	base, err := e.ctDeleted(t.Context(), "endpoint_gone")
	if err != nil {
		t.Fatal(err)
	}
	if err := e.c.KillControlPlane(0); err != nil {
		t.Fatal(err)
	}
	if err := e.write(t.Context(), s, e.endpoints(e.pod(1))...); err != nil {
		t.Fatal(err)
	}
	e.c.SetMode(to)
	if err := e.c.RestartControlPlane(t.Context(), 0); err != nil {
		t.Fatal(err)
	}
	node := e.c.Topo.Node(0)
	waitFor(t.Context(), t, node.Name+" switches to "+to, func() (bool, string) {
		m, desc := e.agentMode(t.Context(), node.Name)
		return m == modes[to], desc
	})
	e.mode = to
	e.afterReconcile(t, ct, "endpoint_gone", base, f, by(e.pod(1).Name), by(e.pod(0).Name))
}
