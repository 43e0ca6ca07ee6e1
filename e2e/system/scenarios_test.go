package system_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/switchyard-proxy/switchyard/e2e/system"
	"github.com/switchyard-proxy/switchyard/e2e/testbed/netns"
	"github.com/switchyard-proxy/switchyard/e2e/testbed/probe"
	eps "github.com/switchyard-proxy/switchyard/e2e/testbed/slices"
	switchyardv1 "github.com/switchyard-proxy/switchyard/proto/switchyard/v1"
)

// scenario is one of the scenarios that kill nothing, run one after the
// other in one cluster, each with a Service of its own.
type scenario struct {
	name string
	run  func(*testing.T, *env)
	// dataPath scenarios run in the nftables mode too
	// (TestScenariosNFTables).
	dataPath bool
}

var scenarios = []scenario{
	{"ClusterIPFromBothNodes", testClusterIP, true},
	{"NodePortOnEachNode", testNodePort, true},
	{"ScaleUpAndDown", testScale, true},
	{"TerminatingOnlyStillServes", testTerminating, false},
	{"ExternalTrafficPolicyLocal", testETPLocal, true},
	{"InternalTrafficPolicyLocal", testITPLocal, false},
	{"SessionAffinityClientIP", testAffinity, true},
	{"UDPFlowMovesWhenEndpointGoes", testUDPFlow, true},
	{"UDPFlowStartedBeforeService", testUDPFlowBeforeService, false},
	{"DeletedServiceRulesGone", testDelete, true},
	{"HundredPorts", testHundredPorts, false},
	{"NodeIdentityEnforced", testNodeIdentity, false},
	{"AdminIsForOperators", testAdminIdentity, false},
	{"StrangersBounded", testStrangersBounded, false},
	{"FiveHundredServices", testFiveHundred, false},
	{"ExplainAgreesWithTraffic", testExplainAgreesWithTraffic, true},
	{"DriftRepaired", testDriftRepaired, true},
	{"DatapathHealth", testDatapathHealth, true},
	{"MaglevSameEndpointFromEveryNode", testMaglev, true},
}

// runScenarios runs the scenarios on e in order, as subtests (only the
// data-path ones with dataPathOnly), and stops after a failed one once
// the test's time is up.
func runScenarios(t *testing.T, e *env, dataPathOnly bool) {
	t.Helper()
	for _, sc := range scenarios {
		if dataPathOnly && !sc.dataPath {
			continue
		}
		if !t.Run(sc.name, func(t *testing.T) { sc.run(t, e) }) && t.Context().Err() != nil {
			return
		}
	}
}

// TestScenarios runs every scenario that kills nothing in one cluster (two
// nodes, four pods: pod-0 and pod-2 on node-0, pod-1 and pod-3 on node-1),
// one after the other, each with a Service of its own.
func TestScenarios(t *testing.T) {
	e := &env{c: startCluster(t, system.Config{Nodes: 2, Pods: 4})}
	runScenarios(t, e, false)
}

// TestScenariosNFTables runs the data-path scenarios with the nftables
// mode, chosen by the control plane's NodeConfig (--mode nftables) while
// every agent starts with --mode iptables: the whole stack with the
// endpoint-map structure, and mode selection by NodeConfig.
func TestScenariosNFTables(t *testing.T) {
	e := &env{c: startCluster(t, system.Config{Nodes: 2, Pods: 4, Mode: modeNFTables}), mode: modeNFTables}
	// The agents report their mode when a stream starts (here: the
	// iptables flag); the kernel shows the one NodeConfig chose.
	for _, n := range e.c.Topo.Nodes() {
		waitFor(t.Context(), t, n.Name+" programs the nftables table", func() (bool, string) {
			out, err := e.c.Topo.Exec(t.Context(), n.NS, "nft", "list", "table", "ip", "switchyard")
			return err == nil && strings.Contains(string(out), "endpoints-tcp-"), fmt.Sprint(err)
		})
		if out, err := e.c.Topo.Exec(t.Context(), n.NS, "iptables-save"); err != nil || strings.Contains(string(out), "KUBE-SERVICES") {
			t.Fatalf("%s: iptables rules in nftables mode: %v\n%s", n.Name, err, out)
		}
	}
	runScenarios(t, e, true)
}

// sources are the namespaces connections start from: each node (OUTPUT
// path) and the client (PREROUTING on node-0, the client's gateway).
func sources(c *system.Cluster) []struct{ name, ns string } {
	var out []struct{ name, ns string }
	for _, n := range c.Topo.Nodes() {
		out = append(out, struct{ name, ns string }{n.Name, n.NS})
	}
	return append(out, struct{ name, ns string }{"client", c.Topo.Client().NS})
}

// testClusterIP: the cluster's own Service (every pod) answers from every
// node and the client, each pod at least once.
func testClusterIP(t *testing.T, e *env) {
	for _, src := range sources(e.c) {
		res, err := e.tcp(t.Context(), src.ns, e.c.VIP(), 80)
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("%s → %s: %v", src.name, e.c.VIP(), res)
		if !answeredBy(res, names(e.c.Topo.Pods()...)...) {
			t.Errorf("%s: want every pod and no failure: %v", src.name, res)
		}
	}
	e.settled(t, "clusterip")
}

// testNodePort: a NodePort Service reached from the client on each node's
// address; the slice spans both nodes, so each node port reaches both.
func testNodePort(t *testing.T, e *env) {
	s := e.createService(t, "sc-nodeport", corev1.ServiceSpec{
		Type: corev1.ServiceTypeNodePort, ClusterIP: "10.96.1.2",
		Ports: []corev1.ServicePort{{Name: "http", Protocol: corev1.ProtocolTCP, Port: 80}},
	}, eps.TCP("http", system.TargetPort))
	want := names(e.pod(0), e.pod(1))
	e.measure(t, change{
		scenario: "nodeport",
		write:    func(ctx context.Context) error { return e.write(ctx, s, e.endpoints(e.pod(0), e.pod(1))...) },
		reached: func(ctx context.Context, n netns.Node) (bool, string) {
			res, err := e.tcp(ctx, e.c.Topo.Client().NS, s.nodePort(n, 0), 24)
			return err == nil && answeredBy(res, want...), fmt.Sprint(res, err)
		},
	})
	for _, src := range sources(e.c) {
		res, err := e.tcp(t.Context(), src.ns, s.vip(0), 24)
		if err != nil || !answeredBy(res, want...) {
			t.Errorf("%s → cluster IP of a NodePort service: %v %v", src.name, res, err)
		}
	}
}

// testScale: one endpoint, then all four (traffic reaches the new ones from
// every node), then only pod-1 (traffic leaves the others).
func testScale(t *testing.T, e *env) {
	s := e.webService(t, "sc-scale", "10.96.1.3", e.pod(0))
	all := e.c.Topo.Pods()
	fromNode := func(want ...string) func(context.Context, netns.Node) (bool, string) {
		return func(ctx context.Context, n netns.Node) (bool, string) {
			res, err := e.tcp(ctx, n.NS, s.vip(0), 40)
			return err == nil && answeredBy(res, want...), fmt.Sprint(res, err)
		}
	}
	waitFor(t.Context(), t, "pod-0 serves", func() (bool, string) { return fromNode(e.pod(0).Name)(t.Context(), e.c.Topo.Node(1)) })
	e.measure(t, change{
		scenario: "scale-up",
		write:    func(ctx context.Context) error { return e.write(ctx, s, e.endpoints(all...)...) },
		reached:  fromNode(names(all...)...),
	})
	e.measure(t, change{
		scenario: "scale-down",
		write:    func(ctx context.Context) error { return e.write(ctx, s, e.endpoints(e.pod(1))...) },
		reached:  fromNode(e.pod(1).Name),
	})
}

// testTerminating: when every endpoint is terminating but still serving,
// kube-proxy's fallback uses them; when none serves, connections are
// refused.
func testTerminating(t *testing.T, e *env) {
	s := e.webService(t, "sc-terminating", "10.96.1.4", e.pod(2))
	terminating := func(serving bool, pods ...netns.Pod) []eps.Endpoint {
		var out []eps.Endpoint
		for _, p := range pods {
			n := e.c.Topo.Node(p.Node)
			out = append(out, eps.Terminating(serving, p.IP.String()).OnNode(n.Name).InZone(system.Zone(n)))
		}
		return out
	}
	e.settled(t, "terminating-setup")
	e.measure(t, change{
		scenario: "terminating-serving",
		write: func(ctx context.Context) error {
			return e.write(ctx, s, terminating(true, e.pod(0), e.pod(1))...)
		},
		reached: func(ctx context.Context, n netns.Node) (bool, string) {
			res, err := e.tcp(ctx, n.NS, s.vip(0), 24)
			return err == nil && answeredBy(res, e.pod(0).Name, e.pod(1).Name), fmt.Sprint(res, err)
		},
	})
	e.measure(t, change{
		scenario: "terminating-not-serving",
		write:    func(ctx context.Context) error { return e.write(ctx, s, terminating(false, e.pod(0), e.pod(1))...) },
		reached: func(ctx context.Context, n netns.Node) (bool, string) {
			res, err := e.tcp(ctx, n.NS, s.vip(0), 8)
			return err == nil && res.Reasons()[probe.ReasonRefused] == res.Attempts, fmt.Sprint(res, err)
		},
	})
}

// testETPLocal: externalTrafficPolicy Local. A node port answers only from
// the node's own endpoints, with the client's address preserved, and a node
// without local endpoints does not answer; the cluster IP still reaches
// every endpoint.
func testETPLocal(t *testing.T, e *env) {
	s := e.createService(t, "sc-etp", corev1.ServiceSpec{
		Type: corev1.ServiceTypeNodePort, ClusterIP: "10.96.1.5",
		ExternalTrafficPolicy: corev1.ServiceExternalTrafficPolicyLocal,
		Ports:                 []corev1.ServicePort{{Name: "http", Protocol: corev1.ProtocolTCP, Port: 80}},
	}, eps.TCP("http", system.TargetPort))
	if err := e.write(t.Context(), s, e.endpoints(e.pod(1))...); err != nil {
		t.Fatal(err)
	}
	client := e.c.Topo.Client()
	waitFor(t.Context(), t, "node-1's node port answers from pod-1", func() (bool, string) {
		res, err := e.tcp(t.Context(), client.NS, s.nodePort(e.c.Topo.Node(1), 0), 8)
		return err == nil && answeredBy(res, e.pod(1).Name), fmt.Sprint(res, err)
	})
	local := names(e.pod(0), e.pod(2)) // node-0's pods
	e.measure(t, change{
		scenario: "etp-local",
		write:    func(ctx context.Context) error { return e.write(ctx, s, e.endpoints(e.pod(0), e.pod(2))...) },
		reached: func(ctx context.Context, n netns.Node) (bool, string) {
			res, err := probe.New(e.c.Topo, client.NS).TCP(ctx, s.nodePort(n, 0),
				probe.Options{Count: 16, Parallel: 16, Timeout: 300 * time.Millisecond})
			if err != nil {
				return false, err.Error()
			}
			if n.Index == 1 { // no local endpoint any more
				return allFailed(res), res.String()
			}
			return answeredBy(res, local...) && res.Clients[client.IP.String()] == res.Attempts, fmt.Sprint(res, " clients ", res.Clients)
		},
	})
	for _, n := range e.c.Topo.Nodes() {
		res, err := e.tcp(t.Context(), n.NS, s.vip(0), 24)
		if err != nil || !answeredBy(res, local...) {
			t.Errorf("%s → cluster IP of an ETP Local service: %v %v", n.Name, res, err)
		}
	}
}

// testITPLocal: internalTrafficPolicy Local. Each node reaches only its own
// endpoints through the cluster IP; a node without any gets no answer.
func testITPLocal(t *testing.T, e *env) {
	local := corev1.ServiceInternalTrafficPolicyLocal
	s := e.createService(t, "sc-itp", corev1.ServiceSpec{ClusterIP: "10.96.1.6", InternalTrafficPolicy: &local,
		Ports: []corev1.ServicePort{{Name: "http", Protocol: corev1.ProtocolTCP, Port: 80}},
	}, eps.TCP("http", system.TargetPort))
	byNode := map[int][]string{0: names(e.pod(0), e.pod(2)), 1: names(e.pod(1), e.pod(3))}
	e.measure(t, change{
		scenario: "itp-local",
		write:    func(ctx context.Context) error { return e.write(ctx, s, e.endpoints(e.c.Topo.Pods()...)...) },
		reached: func(ctx context.Context, n netns.Node) (bool, string) {
			res, err := e.tcp(ctx, n.NS, s.vip(0), 24)
			return err == nil && answeredBy(res, byNode[n.Index]...), fmt.Sprint(res, err)
		},
	})
	e.measure(t, change{
		scenario: "itp-local-none-on-node-1",
		write:    func(ctx context.Context) error { return e.write(ctx, s, e.endpoints(e.pod(0), e.pod(2))...) },
		// node-0's view holds only its own endpoints, which this change
		// leaves as they were: its version stays (views carry no trigger
		// time since issue 34, so an unchanged view is not re-sent).
		acked: func(before, now *switchyardv1.NodeStatus) bool {
			if now.GetName() == e.c.Topo.Nodes()[0].Name {
				return now.GetAckedVersion() == now.GetDesiredVersion()
			}
			return versionChanged(before, now)
		},
		reached: func(ctx context.Context, n netns.Node) (bool, string) {
			res, err := probe.New(e.c.Topo, n.NS).TCP(ctx, s.vip(0), probe.Options{Count: 8, Parallel: 8, Timeout: 300 * time.Millisecond})
			if err != nil {
				return false, err.Error()
			}
			if n.Index == 1 {
				return allFailed(res), res.String()
			}
			return answeredBy(res, byNode[0]...), res.String()
		},
	})
}

// testAffinity: sessionAffinity ClientIP sends every connection of one
// source to one pod.
func testAffinity(t *testing.T, e *env) {
	timeout := int32(600)
	s := e.createService(t, "sc-affinity", corev1.ServiceSpec{ClusterIP: "10.96.1.7",
		SessionAffinity:       corev1.ServiceAffinityClientIP,
		SessionAffinityConfig: &corev1.SessionAffinityConfig{ClientIP: &corev1.ClientIPConfig{TimeoutSeconds: &timeout}},
		Ports:                 []corev1.ServicePort{{Name: "http", Protocol: corev1.ProtocolTCP, Port: 80}},
	}, eps.TCP("http", system.TargetPort))
	sticky := func(ctx context.Context, ns string) (bool, string) {
		res, err := probe.New(e.c.Topo, ns).TCP(ctx, s.vip(0), probe.Options{Count: 30, Timeout: time.Second})
		return err == nil && len(res.Failures) == 0 && res.Attempts == 30 && len(res.Counts) == 1, fmt.Sprint(res, err)
	}
	e.measure(t, change{
		scenario: "affinity",
		write:    func(ctx context.Context) error { return e.write(ctx, s, e.endpoints(e.c.Topo.Pods()...)...) },
		reached:  func(ctx context.Context, n netns.Node) (bool, string) { return sticky(ctx, n.NS) },
	})
	if ok, last := sticky(t.Context(), e.c.Topo.Client().NS); !ok {
		t.Errorf("client: connections spread over pods: %s", last)
	}
}

// testDelete: a deleted Service's rules leave every node and its cluster
// IP no longer answers. (Nothing is programmed for an address that is no
// Service's, so connections time out, as with kube-proxy; REJECT, hence
// "refused", is for a Service without endpoints, see testTerminating.)
func testDelete(t *testing.T, e *env) {
	s := e.webService(t, "sc-delete", "10.96.1.9", e.pod(0), e.pod(1))
	for _, n := range e.c.Topo.Nodes() {
		waitFor(t.Context(), t, n.Name+" reaches the service", func() (bool, string) {
			res, err := e.tcp(t.Context(), n.NS, s.vip(0), 16)
			return err == nil && answeredBy(res, e.pod(0).Name, e.pod(1).Name), fmt.Sprint(res, err)
		})
	}
	e.measure(t, change{
		scenario: "delete",
		write: func(ctx context.Context) error {
			return e.c.API.Client().CoreV1().Services(s.Namespace).Delete(ctx, s.Name, metav1.DeleteOptions{})
		},
		reached: func(ctx context.Context, n netns.Node) (bool, string) {
			rules, err := e.serviceLeft(ctx, n, s)
			if err != nil || len(rules) > 0 {
				return false, fmt.Sprintf("rules left: %q %v", rules, err)
			}
			res, err := probe.New(e.c.Topo, n.NS).TCP(ctx, s.vip(0), probe.Options{Count: 8, Parallel: 8, Timeout: 300 * time.Millisecond})
			return err == nil && allFailed(res), fmt.Sprint(res, err)
		},
	})
	if err := e.c.Slices.Delete(t.Context(), s.Namespace, s.Name, "a"); err != nil {
		t.Fatal(err)
	}
	res, err := e.tcp(t.Context(), e.c.Topo.Client().NS, s.vip(0), 8)
	if err != nil || !allFailed(res) {
		t.Errorf("client still reaches a deleted service: %v %v", res, err)
	}
	t.Logf("after delete, client → %s: %v", s.vip(0), res.Reasons())
}
