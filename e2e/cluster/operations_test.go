package cluster_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net"
	"net/http"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"

	"github.com/switchyard-proxy/switchyard/e2e/cluster"
	"github.com/switchyard-proxy/switchyard/e2e/cluster/images"
	"github.com/switchyard-proxy/switchyard/e2e/testbed/probe"
	"github.com/switchyard-proxy/switchyard/e2e/testbed/ruleread"
	switchyardv1 "github.com/switchyard-proxy/switchyard/proto/switchyard/v1"
)

// What the operations test adds to EchoWorkload: a pod pinned to node-0
// behind an externalTrafficPolicy Local node port (node-1 has no local
// endpoint, so it drops), and a Service selecting no pod (rejected).
const (
	pinnedSvc = "pinned-local"
	noneSvc   = "none"
	// canaryVIP is the datapath canary's cluster IP:port: an address of
	// the bed's Service range in the API server's static band, which only
	// Services asking for it get.
	canaryVIP = "10.96.0.250:80"
	// driftCheckInterval is the agent's default --drift-check-interval.
	driftCheckInterval = 5 * time.Second
)

func operationsWorkload(namespace string) string {
	return fmt.Sprintf(`---
apiVersion: v1
kind: Pod
metadata: {name: pinned, namespace: %[1]s, labels: {app: pinned}}
spec:
  nodeName: %[2]s
  terminationGracePeriodSeconds: 1
  containers:
    - name: pinned
      image: %[3]s
      imagePullPolicy: Never
      args: [serve-hostname, --tcp, --http=false, --port=%[4]d]
      ports: [{containerPort: %[4]d}]
      readinessProbe: {tcpSocket: {port: %[4]d}, periodSeconds: 1}
---
apiVersion: v1
kind: Service
metadata: {name: %[5]s, namespace: %[1]s}
spec:
  type: NodePort
  externalTrafficPolicy: Local
  selector: {app: pinned}
  ports: [{port: %[7]d, targetPort: %[4]d}]
---
apiVersion: v1
kind: Service
metadata: {name: %[6]s, namespace: %[1]s}
spec:
  selector: {app: nothing}
  ports: [{port: %[7]d, targetPort: %[4]d}]
`, namespace, cluster.NodeName(0), images.AgnhostRef, cluster.AgnhostPort, pinnedSvc, noneSvc, cluster.EchoPort)
}

// opsBed is what every phase of TestRealClusterOperations works with:
// the cluster with deploy/ installed (iptables mode), EchoWorkload (3
// echo pods, the client pod on node-0) and operationsWorkload.
type opsBed struct {
	c       *cluster.Cluster
	pod     *probe.Prober // the client pod (node-0)
	podIP   netip.Addr
	outside *probe.Prober // the client namespace: outside the cluster
	vip     netip.AddrPort
	admin   []*grpc.ClientConn // one per node: the replica there, if any
}

// TestRealClusterOperations checks, with real traffic on real kubelets,
// what operators use to look at and trust a node: Explain agrees with
// connections; drift under the agent is repaired at the next check; with
// the datapath canary on, a foreign DROP in front of the agent's rules
// turns that node's /healthz 503 within seconds. Phases run in order on
// one bed; append new ones to phases.
func TestRealClusterOperations(t *testing.T) {
	c := cluster.Start(t, cluster.Config{Nodes: 2})
	b := setUpOperations(t, c)
	phases := []struct {
		name string
		run  func(*testing.T, *opsBed)
	}{
		{"explain", explainAgreesWithTraffic},
		{"drift", driftRepaired},
		{"datapath-health", datapathHealth},
		{"rollout", rolloutSettings},
	}
	for _, p := range phases {
		began := time.Now()
		ok := t.Run(p.name, func(t *testing.T) { p.run(t, b) })
		t.Logf("phase %s: ok=%t in %v", p.name, ok, time.Since(began).Round(time.Millisecond))
	}
}

func setUpOperations(t *testing.T, c *cluster.Cluster) *opsBed {
	ctx := t.Context()
	begin := time.Now()
	installSwitchyard(t, c, cluster.OverlayBase, "")
	settled(t, c)
	t.Logf("switchyard installed and settled %v after install", time.Since(begin).Round(time.Millisecond))
	applyWorkload(t, c, testNS, "operations-workload", cluster.EchoWorkload(testNS, 3, 0)+operationsWorkload(testNS), "pod/client", "pod/pinned")
	waitFor(t, "3 ready endpoints", time.Minute, func() (bool, error) { return ready(t, c) == 3, nil })
	b := &opsBed{c: c, outside: probe.New(c.Topology(), c.ClientNS())}
	var err error
	if b.vip, err = c.ServiceAddr(ctx, testNS, "echo"); err != nil {
		t.Fatal(err)
	}
	podNS, err := c.PodNetNS(ctx, testNS, "client")
	if err != nil {
		t.Fatal(err)
	}
	b.pod, b.podIP = probe.New(c.PodRunner(podNS), ""), b.podIPs(t)["client"]
	for i := range c.Nodes() {
		conn, err := c.AdminConn(i)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { conn.Close() })
		b.admin = append(b.admin, conn)
	}
	waitFor(t, "the echo ClusterIP answers from 3 pods", time.Minute, func() (bool, error) {
		res, err := b.pod.TCP(ctx, b.vip, probe.Options{Count: 30, Parallel: 10, Timeout: time.Second})
		return err == nil && res.Succeeded() == 30 && len(res.Counts) == 3, err
	})
	return b
}

// explain asks every replica and returns the answer of the one that has
// the node's acknowledged view (the replica the agent streams from).
func (b *opsBed) explain(ctx context.Context, req *switchyardv1.ExplainRequest) (*switchyardv1.ExplainResponse, error) {
	var last *switchyardv1.ExplainResponse
	var errs error
	for _, conn := range b.admin {
		resp, err := switchyardv1.NewAdminServiceClient(conn).Explain(ctx, req)
		switch {
		case err != nil:
			errs = errors.Join(errs, err)
		case resp.GetApplied():
			return resp, nil
		default:
			last = resp
		}
	}
	if last != nil {
		return last, nil
	}
	return nil, errs
}

// podIPs maps the test namespace's pod names (their agnhost host names)
// to their addresses.
func (b *opsBed) podIPs(t *testing.T) map[string]netip.Addr {
	t.Helper()
	out := kubectl(t, b.c, "-n", testNS, "get", "pods", "-o", `jsonpath={range .items[*]}{.metadata.name} {.status.podIP}{"\n"}{end}`)
	ips := map[string]netip.Addr{}
	for line := range strings.Lines(out) {
		if f := strings.Fields(line); len(f) == 2 {
			if a, err := netip.ParseAddr(f[1]); err == nil {
				ips[f[0]] = a
			}
		}
	}
	return ips
}

// explainCase is a packet asked of Explain on node, then sent for real
// from the namespace from (whose address is src). want is what Explain
// must say (UNSPECIFIED: whatever the mode does) and endpoints how many
// it must name for FORWARD.
type explainCase struct {
	what      string
	node      int
	from      *probe.Prober
	src       netip.Addr
	dst       netip.AddrPort
	want      switchyardv1.ExplainAction
	endpoints int
}

// explainAgreesWithTraffic asks Explain about a sample of packets and
// sends each for real: a FORWARD must be answered on every attempt, by
// exactly the endpoints named (pod addresses compared), a REJECT refused
// (or reset), a DROP time out, a PASS (no service rule) reach no pod.
// Masquerade is not compared: agnhost serve-hostname does not report the
// client's address.
func explainAgreesWithTraffic(t *testing.T, b *opsBed) {
	ctx, c := t.Context(), b.c
	none, err := c.ServiceAddr(ctx, testNS, noneSvc)
	if err != nil {
		t.Fatal(err)
	}
	nodePort := func(name string, node int) netip.AddrPort {
		p, err := c.NodePort(ctx, testNS, name)
		if err != nil {
			t.Fatal(err)
		}
		return netip.AddrPortFrom(cluster.NodeIP(node), p)
	}
	node1 := probe.New(c.Topology(), c.NodeNS(1))
	outsideIP := c.Topology().Client().IP
	const (
		forward = switchyardv1.ExplainAction_EXPLAIN_ACTION_FORWARD
		reject  = switchyardv1.ExplainAction_EXPLAIN_ACTION_REJECT
		drop    = switchyardv1.ExplainAction_EXPLAIN_ACTION_DROP
		either  = switchyardv1.ExplainAction_EXPLAIN_ACTION_UNSPECIFIED
	)
	cases := []explainCase{
		{"client pod → echo ClusterIP", 0, b.pod, b.podIP, b.vip, forward, 3},
		// iptables mode: PASS (kube-proxy's iptables mode ignores the
		// Service ranges); nftables: REJECT.
		{"client pod → a port echo does not serve", 0, b.pod, b.podIP, netip.AddrPortFrom(b.vip.Addr(), b.vip.Port()+1), either, 0},
		{"client pod → a Service without endpoints", 0, b.pod, b.podIP, none, reject, 0},
		{"client pod → echo-np NodePort on node-1", 1, b.pod, b.podIP, nodePort("echo-np", 1), forward, 3},
		{"node-1 → echo ClusterIP", 1, node1, cluster.NodeIP(1), b.vip, forward, 3},
		{"outside → Local NodePort on node-0 (its endpoint)", 0, b.outside, outsideIP, nodePort(pinnedSvc, 0), forward, 1},
		{"outside → Local NodePort on node-1 (no local endpoint)", 1, b.outside, outsideIP, nodePort(pinnedSvc, 1), drop, 0},
	}
	ips := b.podIPs(t)
	seen := map[switchyardv1.ExplainAction]int{}
	for _, tc := range cases {
		req := &switchyardv1.ExplainRequest{NodeName: cluster.NodeName(tc.node), Protocol: "tcp", SourceIp: tc.src.String(),
			DestinationIp: tc.dst.Addr().String(), DestinationPort: uint32(tc.dst.Port())}
		// The node acknowledged the view with the workload before the
		// traffic above flowed, but a replica may still be catching up.
		var ex *switchyardv1.ExplainResponse
		waitFor(t, tc.what+": Explain from the applied view", time.Minute, func() (bool, error) {
			var err error
			ex, err = b.explain(ctx, req)
			return err == nil && ex.GetApplied() && (tc.want == either || ex.GetAction() == tc.want) &&
				(tc.want != forward || len(ex.GetEndpoints()) == tc.endpoints), fmt.Errorf("%q applied=%t (%v)", ex.GetSummary(), ex.GetApplied(), err)
		})
		count, parallel, timeout := 30, 10, 2*time.Second
		if ex.GetAction() != forward {
			count, parallel, timeout = 8, 8, time.Second
		}
		res, err := tc.from.TCP(ctx, tc.dst, probe.Options{Count: count, Parallel: parallel, Timeout: timeout})
		if err != nil {
			t.Fatal(err)
		}
		seen[ex.GetAction()]++
		if d := trafficDisagrees(ex, res, ips); d != "" {
			t.Errorf("%s (%s → %s, %s): Explain says %q; traffic disagrees: %s\n  traffic: %s", tc.what, tc.src, tc.dst,
				cluster.NodeName(tc.node), ex.GetSummary(), d, res)
			continue
		}
		t.Logf("%s (%s → %s on %s): Explain %q (reason %s); traffic agrees: %s in %v", tc.what, tc.src, tc.dst,
			cluster.NodeName(tc.node), ex.GetSummary(), ex.GetReason(), res, res.Elapsed.Round(time.Millisecond))
	}
	for _, a := range []switchyardv1.ExplainAction{forward, reject, drop} {
		if seen[a] == 0 {
			t.Errorf("the sample holds no %s (answers: %v)", a, seen)
		}
	}
}

// trafficDisagrees says how real connections disagree with Explain, ""
// when they agree.
func trafficDisagrees(ex *switchyardv1.ExplainResponse, res probe.Result, ips map[string]netip.Addr) string {
	reasons := res.Reasons()
	switch ex.GetAction() {
	case switchyardv1.ExplainAction_EXPLAIN_ACTION_FORWARD:
		if res.Succeeded() != res.Attempts {
			return fmt.Sprintf("want every attempt answered, %d failed: %v", len(res.Failures), reasons)
		}
		var want, got []string
		for _, ep := range ex.GetEndpoints() {
			want = append(want, ep.GetAddress())
		}
		for name := range res.Counts {
			ip, ok := ips[name]
			if !ok {
				return fmt.Sprintf("answered by %q, not a pod of %s", name, testNS)
			}
			got = append(got, ip.String())
		}
		slices.Sort(want)
		slices.Sort(got)
		if !slices.Equal(want, got) {
			return fmt.Sprintf("want answers from exactly %v, got %v", want, got)
		}
	case switchyardv1.ExplainAction_EXPLAIN_ACTION_REJECT:
		if reasons[probe.ReasonRefused]+reasons[probe.ReasonReset] != res.Attempts {
			return fmt.Sprintf("want every attempt refused, got %v", reasons)
		}
	case switchyardv1.ExplainAction_EXPLAIN_ACTION_DROP:
		if reasons[probe.ReasonTimeout] != res.Attempts {
			return fmt.Sprintf("want every attempt to time out, got %v", reasons)
		}
	case switchyardv1.ExplainAction_EXPLAIN_ACTION_PASS:
		// No service rule: the node routes it (the Service range is
		// on-link on the bed's nodes, with nobody there); no pod answers.
		if res.Succeeded() != 0 {
			return fmt.Sprintf("want no answer, %d answered by %v", res.Succeeded(), slices.Sorted(maps.Keys(res.Counts)))
		}
	default:
		return "unknown action"
	}
	return ""
}

// nodeRun runs argv in node i's network namespace and fails the test on
// error.
func (b *opsBed) nodeRun(t *testing.T, i int, argv ...string) string {
	t.Helper()
	out, err := b.c.NodeExec(t.Context(), i, argv...)
	if err != nil {
		t.Fatalf("%s: %v", cluster.NodeName(i), err)
	}
	return string(out)
}

// nodeGet fetches url from inside node i's network namespace (the
// agent's ports are the node's, hostNetwork): status code and body.
func (b *opsBed) nodeGet(ctx context.Context, i int, url string) (int, string, error) {
	client := &http.Client{Timeout: 3 * time.Second, Transport: &http.Transport{DisableKeepAlives: true,
		DialContext: func(ctx context.Context, _, addr string) (net.Conn, error) { return b.c.NodeDialContext(ctx, i, addr) }}}
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	resp, err := client.Do(req)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	return resp.StatusCode, strings.TrimSpace(string(body)), err
}

// metric sums node i's agent metric name over its labels.
func (b *opsBed) metric(t *testing.T, i int, name string) float64 {
	t.Helper()
	code, body, err := b.nodeGet(t.Context(), i, "http://127.0.0.1:10249/metrics")
	if err != nil || code != http.StatusOK {
		t.Fatalf("%s agent metrics: %d %v", cluster.NodeName(i), code, err)
	}
	var sum float64
	for line := range strings.Lines(body) {
		line = strings.TrimSpace(line)
		if strings.HasPrefix(line, name+"{") || strings.HasPrefix(line, name+" ") {
			if v, err := strconv.ParseFloat(line[strings.LastIndexByte(line, ' ')+1:], 64); err == nil {
				sum += v
			}
		}
	}
	return sum
}

// pollUntil calls cond every `every` until it holds and returns how long
// that took; it fails the test after timeout with cond's last word.
func pollUntil(t *testing.T, what string, timeout, every time.Duration, cond func() (bool, string)) time.Duration {
	t.Helper()
	begin := time.Now()
	var last string
	for time.Since(begin) < timeout {
		var ok bool
		if ok, last = cond(); ok {
			return time.Since(begin)
		}
		time.Sleep(every)
	}
	t.Fatalf("%s: not within %v (last: %s)", what, timeout, last)
	return 0
}

// driftRepaired breaks, in node-0's network namespace, what its agent
// programmed: one Service's chain deleted, then the whole nat table
// flushed. Each must be repaired at the next drift check (every 5 s),
// counted in switchyard_agent_drift_repairs_total, with the echo Service
// answering again from the client pod and from node-0; a foreign chain
// with a rule in the nat table is neither counted nor touched.
func driftRepaired(t *testing.T, b *opsBed) {
	const n0 = 0
	// The echo Service's chain, as the kernel has it now; also proves that
	// the agent writes the flavour this process's iptables reads.
	chainOf := func() string {
		chain, err := ruleread.IptablesServiceChain([]byte(b.nodeRun(t, n0, "iptables-save", "-t", "nat")), b.vip)
		if err != nil {
			t.Fatalf("node-0 (the host's iptables, %s): %v", strings.TrimSpace(b.nodeRun(t, n0, "iptables", "-V")), err)
		}
		return chain
	}
	chainOf()
	node0 := probe.New(b.c.Topology(), b.c.NodeNS(n0))
	serves := func(p *probe.Prober) func() (bool, string) {
		return func() (bool, string) {
			res, err := p.TCP(t.Context(), b.vip, probe.Options{Count: 15, Parallel: 5, Timeout: time.Second})
			return err == nil && res.Succeeded() == 15 && len(res.Counts) == 3, fmt.Sprint(res, err)
		}
	}

	// A foreign chain and rule next to the agent's: two checks later
	// (each reads back, since the generation moved), nothing repaired
	// and the rule still there.
	repairs, checks := b.metric(t, n0, "switchyard_agent_drift_repairs_total"), b.metric(t, n0, "switchyard_agent_drift_checks_total")
	b.nodeRun(t, n0, "iptables", "-t", "nat", "-N", "E2E-FOREIGN")
	b.nodeRun(t, n0, "iptables", "-t", "nat", "-A", "E2E-FOREIGN", "-p", "tcp", "--dport", "9", "-m", "comment", "--comment", "e2e-foreign", "-j", "RETURN")
	pollUntil(t, "two drift checks after the foreign chain", 4*driftCheckInterval, 100*time.Millisecond, func() (bool, string) {
		n := b.metric(t, n0, "switchyard_agent_drift_checks_total")
		return n >= checks+2, fmt.Sprint(n)
	})
	if n := b.metric(t, n0, "switchyard_agent_drift_repairs_total"); n != repairs {
		t.Errorf("a foreign chain counted as drift: repairs %v → %v", repairs, n)
	}
	if out := b.nodeRun(t, n0, "iptables", "-t", "nat", "-S", "E2E-FOREIGN"); !strings.Contains(out, "e2e-foreign") {
		t.Errorf("the foreign rule is gone:\n%s", out)
	}
	t.Logf("drift: a foreign nat chain with a rule left alone over 2 drift checks (repairs stay %v)", repairs)
	b.nodeRun(t, n0, "sh", "-c", "iptables -t nat -F E2E-FOREIGN && iptables -t nat -X E2E-FOREIGN")

	breaks := []struct {
		name string
		cmds func() [][]string
	}{
		{"echo's chain deleted", func() [][]string {
			chain := chainOf()
			return [][]string{
				{"sh", "-c", `iptables-save -t nat | grep -- "-j ` + chain + `$" | sed 's/^-A/-D/' | while read -r r; do eval iptables -t nat $r; done`},
				{"iptables", "-t", "nat", "-F", chain}, {"iptables", "-t", "nat", "-X", chain}}
		}},
		{"nat table flushed", func() [][]string { return [][]string{{"iptables", "-t", "nat", "-F"}} }},
	}
	for _, br := range breaks {
		repairs := b.metric(t, n0, "switchyard_agent_drift_repairs_total")
		for _, argv := range br.cmds() {
			b.nodeRun(t, n0, argv...)
		}
		broke := time.Now()
		// The break took: node-0's own connection is not DNATed (unless
		// the repair already came).
		res, err := node0.TCP(t.Context(), b.vip, probe.Options{Count: 1, Timeout: 300 * time.Millisecond})
		if err != nil {
			t.Fatal(err)
		}
		if res.Succeeded() > 0 && b.metric(t, n0, "switchyard_agent_drift_repairs_total") == repairs {
			t.Errorf("%s: the echo ClusterIP still answers from node-0 right after the break: %s", br.name, res)
		}
		pollUntil(t, br.name+": drift repaired", 3*driftCheckInterval, 50*time.Millisecond, func() (bool, string) {
			n := b.metric(t, n0, "switchyard_agent_drift_repairs_total")
			return n > repairs, fmt.Sprint(n)
		})
		repaired := time.Since(broke)
		pollUntil(t, br.name+": node-0 → echo ClusterIP again", time.Minute, 100*time.Millisecond, serves(node0))
		fromNode := time.Since(broke)
		pollUntil(t, br.name+": client pod → echo ClusterIP again", time.Minute, 100*time.Millisecond, serves(b.pod))
		fromPod := time.Since(broke)
		after := b.metric(t, n0, "switchyard_agent_drift_repairs_total")
		t.Logf("drift case=%q on node-0: repaired %v after the break (%v objects counted); the echo ClusterIP answered from all 3 pods again, from node-0 %v and from the client pod %v after it",
			br.name, repaired.Round(10*time.Millisecond), after-repairs, fromNode.Round(10*time.Millisecond), fromPod.Round(10*time.Millisecond))
		if repaired > driftCheckInterval+5*time.Second {
			t.Errorf("%s: repaired %v after the break: more than the check interval (%v) and a sync", br.name, repaired, driftCheckInterval)
		}
	}
	_, body, _ := b.nodeGet(t.Context(), n0, "http://127.0.0.1:10256/healthz")
	t.Logf("node-0 /healthz after the repairs: %s", body)
}

// healthz is node i's agent's /healthz as far as the datapath goes.
type healthz struct {
	code            int
	DatapathHealthy *bool `json:"datapathHealthy"`
	body            string
}

func (b *opsBed) healthz(ctx context.Context, i int) healthz {
	code, body, err := b.nodeGet(ctx, i, "http://127.0.0.1:10256/healthz")
	h := healthz{code: code, body: body}
	if err != nil {
		h.body = err.Error()
		return h
	}
	_ = json.Unmarshal([]byte(body), &h)
	return h
}

func (h healthz) is(code int, healthy bool) bool {
	return h.code == code && h.DatapathHealthy != nil && *h.DatapathHealthy == healthy
}

// datapathHealth turns the datapath canary on as the README tells
// operators (a selector-less Service reserving its cluster IP, the agent
// ConfigMap's datapathCanary, a DaemonSet restart), then puts a foreign
// DROP of the canary's address in front of node-1's agent rules (raw
// OUTPUT: before nat OUTPUT's DNAT): node-1's /healthz must turn 503
// within seconds while node-0's stays 200, the agent must leave the rule
// alone (no drift repair), and /healthz must be 200 again soon after the
// rule is removed.
func datapathHealth(t *testing.T, b *opsBed) {
	ctx, c := t.Context(), b.c
	vip := netip.MustParseAddrPort(canaryVIP)
	if err := c.Apply(ctx, "datapath-canary", fmt.Sprintf(`apiVersion: v1
kind: Service
metadata: {name: switchyard-datapath-canary, namespace: %s}
spec:
  clusterIP: %s
  ports: [{name: canary, port: %d, protocol: TCP}]
`, cluster.SystemNS, vip.Addr(), vip.Port())); err != nil {
		t.Fatal(err)
	}
	cfg := kubectl(t, c, "-n", cluster.SystemNS, "get", "configmap", "switchyard-agent", "-o", `jsonpath={.data.config\.yaml}`)
	if strings.Contains(cfg, "\ndatapathCanary:") {
		t.Fatalf("the agent config already sets datapathCanary:\n%s", cfg)
	}
	cfg += fmt.Sprintf("\ndatapathCanary: %s\ndatapathProbeInterval: 1s\n", vip)
	patch, err := json.Marshal(map[string]any{"data": map[string]string{"config.yaml": cfg}})
	if err != nil {
		t.Fatal(err)
	}
	restart := time.Now()
	kubectl(t, c, "-n", cluster.SystemNS, "patch", "configmap", "switchyard-agent", "--type=merge", "-p", string(patch))
	kubectl(t, c, "-n", cluster.SystemNS, "rollout", "restart", "daemonset/switchyard-agent")
	kubectl(t, c, "-n", cluster.SystemNS, "rollout", "status", "daemonset/switchyard-agent", "--timeout=3m")
	settled(t, c)
	for i := range c.Nodes() {
		pollUntil(t, cluster.NodeName(i)+" /healthz 200 with the canary healthy", 2*time.Minute, 200*time.Millisecond, func() (bool, string) {
			h := b.healthz(ctx, i)
			return h.is(http.StatusOK, true), fmt.Sprint(h.code, " ", h.body)
		})
	}
	t.Logf("datapath canary %s on: agents restarted and every /healthz 200 with datapathHealthy %v after the ConfigMap change",
		vip, time.Since(restart).Round(time.Millisecond))

	const n1 = 1
	h := b.healthz(ctx, n1)
	t.Logf("node-1 /healthz before: %d %s", h.code, h.body)
	drop := func(op string) []string {
		return []string{"iptables", "-t", "raw", op, "OUTPUT", "-d", vip.Addr().String() + "/32", "-p", "tcp",
			"-m", "comment", "--comment", "e2e-foreign", "-j", "DROP"}
	}
	const failedProbes = `switchyard_agent_datapath_probes_total{result="failed"}`
	repairs, checks := b.metric(t, n1, "switchyard_agent_drift_repairs_total"), b.metric(t, n1, "switchyard_agent_drift_checks_total")
	failed := b.metric(t, n1, failedProbes)
	b.nodeRun(t, n1, drop("-I")...)
	dropped := true
	t.Cleanup(func() {
		if dropped {
			_, _ = c.NodeExec(context.WithoutCancel(ctx), n1, drop("-D")...)
		}
	})
	down := pollUntil(t, "node-1 /healthz 503", 20*time.Second, 50*time.Millisecond, func() (bool, string) {
		h = b.healthz(ctx, n1)
		return h.is(http.StatusServiceUnavailable, false), fmt.Sprint(h.code, " ", h.body)
	})
	t.Logf("node-1 /healthz with the DROP: %d %s", h.code, h.body)
	if h0 := b.healthz(ctx, 0); !h0.is(http.StatusOK, true) {
		t.Errorf("node-0, untouched, /healthz: %d %s", h0.code, h0.body)
	}
	// A drift check after the insert read the rules back: the foreign
	// DROP is not the agent's to remove, and /healthz stays 503.
	pollUntil(t, "a drift check after the DROP", 3*driftCheckInterval, 100*time.Millisecond, func() (bool, string) {
		n := b.metric(t, n1, "switchyard_agent_drift_checks_total")
		return n > checks, fmt.Sprint(n)
	})
	if out := b.nodeRun(t, n1, "iptables", "-t", "raw", "-S", "OUTPUT"); !strings.Contains(out, "e2e-foreign") {
		t.Errorf("the foreign DROP is gone:\n%s", out)
	}
	if h = b.healthz(ctx, n1); !h.is(http.StatusServiceUnavailable, false) {
		t.Errorf("node-1 /healthz with the foreign DROP still in place: %d %s", h.code, h.body)
	}
	b.nodeRun(t, n1, drop("-D")...)
	dropped = false
	up := pollUntil(t, "node-1 /healthz 200 again", 20*time.Second, 50*time.Millisecond, func() (bool, string) {
		h = b.healthz(ctx, n1)
		return h.is(http.StatusOK, true), fmt.Sprint(h.code, " ", h.body)
	})
	if n := b.metric(t, n1, "switchyard_agent_drift_repairs_total"); n != repairs {
		t.Errorf("the foreign DROP counted as drift: repairs %v → %v", repairs, n)
	}
	t.Logf("datapath node-1, foreign DROP of %s in raw OUTPUT: 200→503 %v after the insert; 503→200 %v after its removal (%v failed probes)",
		vip.Addr(), down.Round(10*time.Millisecond), up.Round(10*time.Millisecond), b.metric(t, n1, failedProbes)-failed)
	if down > 10*time.Second {
		t.Errorf("503 only %v after the DROP: want within 2 probes (1 s each) and a poll", down)
	}
	if up > 10*time.Second {
		t.Errorf("200 only %v after the DROP's removal: want within a probe interval and a poll", up)
	}
}
