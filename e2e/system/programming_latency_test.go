package system_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/switchyard-proxy/switchyard/e2e/system"
	"github.com/switchyard-proxy/switchyard/e2e/testbed/netns"
	eps "github.com/switchyard-proxy/switchyard/e2e/testbed/slices"
	switchyardv1 "github.com/switchyard-proxy/switchyard/proto/switchyard/v1"
)

// Metrics of programming latency, and of Node objects gone.
const (
	// agentLatencyMetric is kube-proxy's histogram, on every agent's
	// /metrics (--metrics-bind-address, inside its node's namespace).
	agentLatencyMetric = "kubeproxy_network_programming_duration_seconds"
	agentMetricsURL    = "http://127.0.0.1:10249/metrics"
	// cpLatencyMetric is the control plane's: one observation per ACK
	// that reports a latency (the largest of that apply).
	cpLatencyMetric = "switchyard_network_programming_duration_seconds"
	// invalidTriggerMetric counts slices whose trigger-time annotation
	// does not parse (translate.ReasonInvalidTriggerTime).
	invalidTriggerMetric = `switchyard_controlplane_skipped_input_total{kind="EndpointSlice",reason="InvalidTriggerTime"}`
	agentsWithoutNode    = "switchyard_controlplane_agents_without_node"
)

const (
	// latencySlack is what a reported latency may exceed the test's own
	// measure by (from the trigger time it wrote until it saw every ACK;
	// an agent observes before it ACKs, on the same clock): the ACK poll's
	// period (20 ms, plus a ListNodes call) and 1 s for a loaded machine.
	latencySlack = 20*time.Millisecond + time.Second
	// quietFor is how long the test watches for an observation that must
	// not come, once every node ACKed the change: a fixed wait that only
	// shows that nothing happens.
	quietFor = time.Second
	// sameLatency is how far a latency may read apart in two records of
	// one report (float seconds in a histogram, a Duration in ListNodes).
	sameLatency = 10 * time.Millisecond
	// nodeObjectBound is how soon the control plane must show a Node
	// object gone, or back (an informer event away).
	nodeObjectBound = 10 * time.Second
)

// Triggers that must observe nothing: kube-proxy skips a time in the
// future (here the control plane drops it) and one that does not parse.
const (
	futureTrigger  = "2099-01-01T00:00:00Z"
	garbageTrigger = "not-a-time"
)

// latencyCase is one step of TestProgrammingLatency, each with a Service
// and namespace of its own; disrupts: it kills or deletes something, and
// a failure stops the cases after it.
type latencyCase struct {
	name     string
	run      func(*testing.T, *env)
	disrupts bool
}

var latencyCases = []latencyCase{
	{"FirstViewsObserveNothing", testLatencyAtStart, false},
	{"SliceChange", testLatencySliceChange, false},
	{"ServiceOnlyEdit", testLatencyServiceEdit, false},
	{"SliceDeleted", testLatencySliceDeleted, false},
	{"FutureTriggerThenChange", testLatencyFutureTrigger, false},
	{"InvalidTrigger", testLatencyInvalidTrigger, false},
	{"AgentRestart", testLatencyAgentRestart, true},
	{"NodeObjectDeleted", testNodeObjectDeleted, true},
}

// TestProgrammingLatency checks, in each mode, that network programming
// latency means what kube-proxy's means (issue 34): only the trigger times
// of EndpointSlices added or updated by a change are observed, once per
// agent, within what the test measured itself; never a Service-only
// change, a slice deletion, an agent's first view, a time in the future
// or one that does not parse. Then a Node object deleted under its
// connected agent: counted, warned about once, the node keeps forwarding
// and converges when the Node is back. Two nodes, four pods (pod-0 and
// pod-2 on node-0, pod-1 and pod-3 on node-1); the agents start with
// --mode iptables, and the control plane's --mode nftables switches them
// by NodeConfig, as in TestScenariosNFTables. A cluster of its own per
// mode, not a scenario of TestScenarios: it kills an agent and deletes a
// Node.
func TestProgrammingLatency(t *testing.T) {
	for _, mode := range []struct{ name, controlPlane string }{{"iptables", ""}, {"nftables", "nftables"}} {
		t.Run(mode.name, func(t *testing.T) {
			e := &env{c: startCluster(t, system.Config{Nodes: 2, Pods: 4, Mode: mode.controlPlane}), mode: mode.name}
			for _, n := range e.c.Topo.Nodes() {
				waitFor(t.Context(), t, n.Name+" runs "+mode.name, func() (bool, string) {
					m, desc := e.agentMode(t.Context(), n.Name)
					return m == modes[mode.name], desc
				})
			}
			for _, lc := range latencyCases {
				if !t.Run(lc.name, func(t *testing.T) { lc.run(t, e) }) && lc.disrupts {
					return
				}
			}
		})
	}
}

// putSlice creates or replaces EndpointSlice <svc>-<suffix> with pods as
// ready endpoints and trigger as its last-change-trigger-time annotation,
// verbatim ("" leaves it out).
func (e *env) putSlice(ctx context.Context, s *svc, suffix, trigger string, pods ...netns.Pod) error {
	cs := e.c.API.Client()
	live, err := cs.CoreV1().Services(s.Namespace).Get(ctx, s.Name, metav1.GetOptions{})
	if err != nil {
		return err
	}
	es, err := eps.Build(live, eps.Slice{Namespace: s.Namespace, Service: s.Name, Suffix: suffix, Ports: s.ports, Endpoints: e.endpoints(pods...)}, time.Time{})
	if err != nil {
		return err
	}
	if trigger != "" {
		es.Annotations = map[string]string{corev1.EndpointsLastChangeTriggerTime: trigger}
	}
	api := cs.DiscoveryV1().EndpointSlices(s.Namespace)
	cur, err := api.Get(ctx, es.Name, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		_, err = api.Create(ctx, es, metav1.CreateOptions{})
	case err == nil:
		es.ResourceVersion = cur.ResourceVersion
		_, err = api.Update(ctx, es, metav1.UpdateOptions{})
	}
	if err != nil {
		return fmt.Errorf("put EndpointSlice %s/%s: %w", s.Namespace, es.Name, err)
	}
	return nil
}

// changeSlice writes slice suffix of s with pods, stamped with the time
// just before the write (as the EndpointSlice controller does), waits
// until every one of nodes (nil: all) acked the new version, and returns
// the bound of a latency reported for it: from the trigger time to the
// moment the test saw the ACKs, plus latencySlack.
func (e *env) changeSlice(t *testing.T, s *svc, suffix string, nodes []netns.Node, pods ...netns.Pod) time.Duration {
	t.Helper()
	var trigger time.Time
	seen := e.acked(t, nodes, func(ctx context.Context) error {
		trigger = time.Now().UTC()
		return e.putSlice(ctx, s, suffix, trigger.Format(time.RFC3339Nano), pods...)
	})
	return seen.Sub(trigger) + latencySlack
}

// acked makes write, waits until each of nodes (nil: all) is connected
// and acked a desired version other than its version before, and returns
// when it saw that.
func (e *env) acked(t *testing.T, nodes []netns.Node, write func(context.Context) error) time.Time {
	t.Helper()
	if nodes == nil {
		nodes = e.c.Topo.Nodes()
	}
	before, err := e.nodes(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if err := write(t.Context()); err != nil {
		t.Fatal(err)
	}
	waitFor(t.Context(), t, "the change acked", func() (bool, string) {
		now, err := e.nodes(t.Context())
		if err != nil {
			return false, err.Error()
		}
		for _, n := range nodes {
			if st := now[n.Name]; !st.GetConnected() || !versionChanged(before[n.Name], st) {
				return false, fmt.Sprintf("%s: acked %q desired %q (was %q)", n.Name,
					short(st.GetAckedVersion()), short(st.GetDesiredVersion()), short(before[n.Name].GetDesiredVersion()))
			}
		}
		return true, ""
	})
	return time.Now()
}

// everyNode is n observations on every node.
func everyNode(e *env, n int) observed {
	out := observed{}
	for _, node := range e.c.NodeNames() {
		out[node] = n
	}
	return out
}

// reachedFrom waits until the connections of each of nodes (nil: all)
// to s reach exactly pods.
func (e *env) reachedFrom(t *testing.T, nodes []netns.Node, s *svc, pods ...netns.Pod) {
	t.Helper()
	if nodes == nil {
		nodes = e.c.Topo.Nodes()
	}
	for _, n := range nodes {
		waitFor(t.Context(), t, n.Name+" reaches "+strings.Join(names(pods...), ","), func() (bool, string) {
			res, err := e.tcp(t.Context(), n.NS, s.vip(0), 16)
			return err == nil && answeredBy(res, names(pods...)...), fmt.Sprint(res, err)
		})
	}
}

// testLatencyAtStart: the agents connected after the cluster's Service
// and slice existed, whose trigger time is before every process's start;
// their first views observe nothing, anywhere.
func testLatencyAtStart(t *testing.T, e *env) {
	r := e.steadyRecords(t, "start")
	t.Logf("latency step=start %v", r)
	for name, h := range r.agents {
		if h != (hist{}) || r.nodes[name].GetLastProgrammingLatencyTime() != nil {
			t.Errorf("%s observed %v/%.4fs from its first view (ListNodes: last report at %v), want nothing",
				name, h.count, h.sum, r.nodes[name].GetLastProgrammingLatencyTime())
		}
	}
	if r.cp != (hist{}) {
		t.Errorf("the control plane observed %v/%.4fs from first views, want nothing", r.cp.count, r.cp.sum)
	}
}

// testLatencySliceChange: one slice changed, stamped just before the
// write: one observation on each agent, one per ACK on the control plane,
// each no longer than the test saw the change take.
func testLatencySliceChange(t *testing.T, e *env) {
	s := e.webService(t, "lat-change", "10.96.34.1", e.pod(0))
	before := e.steadyRecords(t, "slice-change")
	bound := e.changeSlice(t, s, "a", nil, e.pod(0), e.pod(1))
	e.checkObserved(t, "slice-change", before, everyNode(e, 1), bound)
	e.reachedFrom(t, nil, s, e.pod(0), e.pod(1))
}

// testLatencyServiceEdit: sessionAffinity to ClientIP and back, each edit
// a new version every node acks; a Service-only change observes nothing
// (before the fix it observed the age of the last slice change).
func testLatencyServiceEdit(t *testing.T, e *env) {
	s := e.webService(t, "lat-edit", "10.96.34.2", e.pod(0), e.pod(1))
	written := time.Now()
	before := e.steadyRecords(t, "service-edit")
	// Let the slice's trigger be several seconds old, so that an
	// observation of its age would stand out by its value too.
	if age := time.Since(written); age < 3*time.Second {
		time.Sleep(3*time.Second - age) // a schedule (the slice's age), not a wait for a condition
	}
	services := e.c.API.Client().CoreV1().Services(s.Namespace)
	for _, affinity := range []corev1.ServiceAffinity{corev1.ServiceAffinityClientIP, corev1.ServiceAffinityNone} {
		e.acked(t, nil, func(ctx context.Context) error {
			live, err := services.Get(ctx, s.Name, metav1.GetOptions{})
			if err != nil {
				return err
			}
			// The API server defaults ClientIP's timeout; None takes no config.
			live.Spec.SessionAffinity, live.Spec.SessionAffinityConfig = affinity, nil
			_, err = services.Update(ctx, live, metav1.UpdateOptions{})
			return err
		})
	}
	e.checkObserved(t, "service-edit", before, nil, 0)
}

// testLatencySliceDeleted: a Service with two slices loses one; the
// deletion observes nothing (before the fix: the remaining slice's age).
func testLatencySliceDeleted(t *testing.T, e *env) {
	s := e.webService(t, "lat-delete", "10.96.34.3", e.pod(0))
	e.changeSlice(t, s, "b", nil, e.pod(1))
	before := e.steadyRecords(t, "slice-deleted")
	e.acked(t, nil, func(ctx context.Context) error { return e.c.Slices.Delete(ctx, s.Namespace, s.Name, "b") })
	e.checkObserved(t, "slice-deleted", before, nil, 0)
	e.reachedFrom(t, nil, s, e.pod(0))
}

// testLatencyFutureTrigger: slice a stamped in 2099 observes nothing;
// then slice b of the same Service, stamped now, observes once per agent
// (before the fix the Service's newest trigger stayed in 2099 and every
// later change of it observed nothing).
func testLatencyFutureTrigger(t *testing.T, e *env) {
	s := e.webService(t, "lat-future", "10.96.34.4", e.pod(0))
	e.changeSlice(t, s, "b", nil, e.pod(1))
	before := e.steadyRecords(t, "future-trigger")
	e.acked(t, nil, func(ctx context.Context) error { return e.putSlice(ctx, s, "a", futureTrigger, e.pod(0), e.pod(2)) })
	after := e.checkObserved(t, "future-trigger", before, nil, 0)
	bound := e.changeSlice(t, s, "b", nil, e.pod(1), e.pod(3))
	e.checkObserved(t, "after-future-trigger", after, everyNode(e, 1), bound)
	e.reachedFrom(t, nil, s, e.c.Topo.Pods()...)
}

// testLatencyInvalidTrigger: a trigger that does not parse observes
// nothing and counts as skipped input; the slice's endpoints still serve.
func testLatencyInvalidTrigger(t *testing.T, e *env) {
	s := e.webService(t, "lat-invalid", "10.96.34.5", e.pod(0))
	before := e.steadyRecords(t, "invalid-trigger")
	e.acked(t, nil, func(ctx context.Context) error { return e.putSlice(ctx, s, "a", garbageTrigger, e.pod(0), e.pod(1)) })
	after := e.checkObserved(t, "invalid-trigger", before, nil, 0)
	t.Logf("latency step=invalid-trigger %s %v→%v", invalidTriggerMetric, before.invalid, after.invalid)
	if after.invalid < before.invalid+1 {
		t.Errorf("%s went %v→%v, want at least +1", invalidTriggerMetric, before.invalid, after.invalid)
	}
	e.reachedFrom(t, nil, s, e.pod(0), e.pod(1))
}

// testLatencyAgentRestart: kill -9 node-0's agent, change a slice while
// it is down, start it again (state restored, stream resumed). Its first
// view brings the change yet observes nothing (a stream's first batch,
// and a trigger before the agent's start); node-1's agent observes the
// change once, as usual, and the control plane only its ACK.
func testLatencyAgentRestart(t *testing.T, e *env) {
	ctx := t.Context()
	node0, node1 := e.c.Topo.Node(0), e.c.Topo.Node(1)
	s := e.webService(t, "lat-restart", "10.96.34.6", e.pod(1))
	before := e.steadyRecords(t, "agent-restart")
	if err := e.c.KillAgent(0); err != nil {
		t.Fatal(err)
	}
	bound := e.changeSlice(t, s, "a", []netns.Node{node1}, e.pod(1), e.pod(3))
	restart := time.Now()
	if err := e.c.RestartAgent(0); err != nil {
		t.Fatal(err)
	}
	waitFor(ctx, t, node0.Name+" reconnects and acks", func() (bool, string) {
		now, err := e.nodes(ctx)
		if err != nil {
			return false, err.Error()
		}
		st := now[node0.Name]
		return reconnected(restart)(nil, st), fmt.Sprintf("connected %t since %v acked %q desired %q", st.GetConnected(),
			st.GetConnectedSince().AsTime(), short(st.GetAckedVersion()), short(st.GetDesiredVersion()))
	})
	e.settled(t, "agent-restart")
	before.agents[node0.Name] = hist{} // a new process counts from zero, and must stay there
	e.checkObserved(t, "agent-restart", before, observed{node1.Name: 1}, bound)
	e.reachedFrom(t, nil, s, e.pod(1), e.pod(3))
}

// testNodeObjectDeleted: node-1's Node object is deleted while its agent
// stays connected. The control plane counts the agent, shows the Node
// object missing and warns once; the node keeps forwarding with its last
// rules, through a change made meanwhile. Once the Node is back (same
// name, labels and addresses) the node converges to that change.
func testNodeObjectDeleted(t *testing.T, e *env) {
	ctx := t.Context()
	n := e.c.Topo.Node(1)
	s := e.webService(t, "lat-node", "10.96.34.7", e.pod(0), e.pod(1))
	e.reachedFrom(t, nil, s, e.pod(0), e.pod(1))
	e.waitNodeObject(t, n.Name, switchyardv1.NodeObject_NODE_OBJECT_PRESENT, 0)
	if w := e.noNodeWarnings(n.Name); w != 0 {
		t.Fatalf("%d warnings about %s's Node object before it was deleted", w, n.Name)
	}
	nodes := e.c.API.Client().CoreV1().Nodes()
	orig, err := nodes.Get(ctx, n.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if err := nodes.Delete(ctx, n.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	e.waitNodeObject(t, n.Name, switchyardv1.NodeObject_NODE_OBJECT_MISSING, 1)
	waitFor(ctx, t, "the control plane warns about "+n.Name, func() (bool, string) {
		w := e.noNodeWarnings(n.Name)
		return w > 0, fmt.Sprint(w, " warnings")
	})
	if err := e.write(ctx, s, e.endpoints(e.pod(2), e.pod(3))...); err != nil {
		t.Fatal(err)
	}
	e.reachedFrom(t, []netns.Node{e.c.Topo.Node(0)}, s, e.pod(2), e.pod(3))
	// node-1 gets no change without its Node: its last rules, pod-0 and
	// pod-1, still forward.
	res, err := e.tcp(ctx, n.NS, s.vip(0), 16)
	t.Logf("%s without its Node object → %s: %v", n.Name, s.vip(0), res)
	if err != nil || !answeredBy(res, e.pod(0).Name, e.pod(1).Name) {
		t.Errorf("%s does not forward with its last rules without its Node object: %v %v", n.Name, res, err)
	}
	if err := e.recreateNode(ctx, orig); err != nil {
		t.Fatal(err)
	}
	e.waitNodeObject(t, n.Name, switchyardv1.NodeObject_NODE_OBJECT_PRESENT, 0)
	e.reachedFrom(t, []netns.Node{n}, s, e.pod(2), e.pod(3))
	w := e.noNodeWarnings(n.Name)
	t.Logf("node-object %s: %d warnings of no Node object over the episode", n.Name, w)
	if w != 1 {
		t.Errorf("the control plane warned %d times that %s has no Node object, want once", w, n.Name)
	}
	e.settled(t, "node-object-back")
}

// waitNodeObject waits, at most nodeObjectBound, until the control plane
// counts gauge agents without their Node object and ListNodes shows node
// connected with its Node object as want (PRESENT: also acked its
// desired version).
func (e *env) waitNodeObject(t *testing.T, node string, want switchyardv1.NodeObject, gauge float64) {
	t.Helper()
	ctx := t.Context()
	start := time.Now()
	err := poll(ctx, nodeObjectBound, func() (bool, string) {
		m, err := e.c.ControlPlaneMetrics(ctx, e.replica)
		if err != nil {
			return false, err.Error()
		}
		g, exposed := m[agentsWithoutNode]
		now, err := e.nodes(ctx)
		if err != nil {
			return false, err.Error()
		}
		st := now[node]
		converged := want == switchyardv1.NodeObject_NODE_OBJECT_MISSING || st.GetAckedVersion() == st.GetDesiredVersion()
		return exposed && g == gauge && st.GetConnected() && st.GetNodeObject() == want && converged,
			fmt.Sprintf("%s=%v (exposed %t); %s: connected %t node_object %v acked %q desired %q", agentsWithoutNode, g, exposed,
				node, st.GetConnected(), st.GetNodeObject(), short(st.GetAckedVersion()), short(st.GetDesiredVersion()))
	})
	if err != nil {
		t.Fatalf("within %v: %s %v, connected, and %s=%v: %v", nodeObjectBound, node, want, agentsWithoutNode, gauge, err)
	}
	t.Logf("node-object %s %v and %s=%v after %v", node, want, agentsWithoutNode, gauge, time.Since(start).Round(time.Millisecond))
}

// noNodeWarnings counts the control plane's WARN lines saying node has no
// Node object (slog's text format: level=WARN msg="…" node=<name>).
func (e *env) noNodeWarnings(node string) int {
	n := 0
	for line := range strings.SplitSeq(e.c.ControlPlaneLogsAt(e.replica), "\n") {
		if strings.Contains(line, "level=WARN") && strings.Contains(line, "no Node object") &&
			slices.Contains(strings.Fields(line), "node="+node) {
			n++
		}
	}
	return n
}

// recreateNode creates orig's Node again: its name, labels, annotations
// and spec, then its addresses (status), as the harness made it.
func (e *env) recreateNode(ctx context.Context, orig *corev1.Node) error {
	nodes := e.c.API.Client().CoreV1().Nodes()
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: orig.Name, Labels: orig.Labels, Annotations: orig.Annotations}, Spec: orig.Spec}
	created, err := nodes.Create(ctx, n, metav1.CreateOptions{})
	if err != nil {
		return fmt.Errorf("re-create node %s: %w", orig.Name, err)
	}
	created.Status.Addresses = orig.Status.Addresses
	if _, err := nodes.UpdateStatus(ctx, created, metav1.UpdateOptions{}); err != nil {
		return fmt.Errorf("set addresses of node %s: %w", orig.Name, err)
	}
	return nil
}
