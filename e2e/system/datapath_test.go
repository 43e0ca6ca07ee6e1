package system_test

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"net/netip"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/switchyard-proxy/switchyard/e2e/system"
	"github.com/switchyard-proxy/switchyard/e2e/testbed/netns"
)

// The datapath canary's name, as the agent programs it.
const (
	canaryNamespace = "switchyard-system"
	canaryService   = "switchyard-datapath-canary"
)

// datapathBreak breaks node-0's datapath to the canary underneath its
// agent and repairs it.
type datapathBreak struct {
	name string
	// brk and fix are run in node-0's namespace; fix is nil when the
	// agent's drift repair is the fix.
	brk, fix [][]string
}

// testDatapathHealth: node-0's /healthz, 200 while its canary answers
// through the rules its agent programmed, turns 503 within seconds of a
// foreign DROP in front of those rules and 200 again once it is gone;
// after its table is flushed it is 503 until the agent's drift check
// repairs it (not in the ipvs mode, which has no drift check). The canary's address is reserved as an operator would,
// by a selector-less Service of its name, which the agent's replaces.
func testDatapathHealth(t *testing.T, e *env) {
	ctx := t.Context()
	vip := netip.MustParseAddrPort(system.DatapathCanary)
	reserveCanary(t, e, vip)
	n0 := e.c.Topo.Node(0)
	mode := e.dataplaneMode()
	waitFor(ctx, t, "node-0's canary probed and healthy", func() (bool, string) {
		code, body := e.healthz(ctx, n0)
		return code == 200 && strings.Contains(body, `"datapathHealthy":true`), fmt.Sprint(code, " ", body)
	})
	_, body := e.healthz(ctx, n0)
	t.Logf("node-0 /healthz: %s", body)
	for _, b := range datapathBreaks(mode, vip.Addr().String()) {
		t.Run(b.name, func(t *testing.T) {
			ctx := t.Context()
			checks := e.agentMetric(ctx, t, n0, "switchyard_agent_drift_checks_total")
			repairs := e.agentMetric(ctx, t, n0, "switchyard_agent_drift_repairs_total")
			if b.fix == nil {
				// Right after a drift check, so that the next one (and
				// the repair) comes a whole interval after the break.
				waitFor(ctx, t, "a drift check", func() (bool, string) {
					n := e.agentMetric(ctx, t, n0, "switchyard_agent_drift_checks_total")
					return n > checks, fmt.Sprint(n)
				})
			}
			e.run(ctx, t, n0, b.brk)
			broke := time.Now()
			failed := e.waitHealthz(ctx, t, n0, 503, `"datapathHealthy":false`)
			down := time.Since(broke)
			t.Logf("node-0 /healthz: 503 %s", failed)
			fixed, from := broke, "the break (the drift repair)"
			if b.fix != nil {
				e.run(ctx, t, n0, b.fix)
				fixed, from = time.Now(), "the removal"
			}
			e.waitHealthz(ctx, t, n0, 200, `"datapathHealthy":true`)
			up := time.Since(fixed)
			t.Logf("datapath mode=%s case=%s: 200→503 %v after the break; 503→200 %v after %s", mode, b.name,
				down.Round(10*time.Millisecond), up.Round(10*time.Millisecond), from)
			if down > 5*time.Second {
				t.Errorf("503 only %v after the break, want within 2 probes (1 s each) and a poll", down)
			}
			if n := e.agentMetric(ctx, t, n0, "switchyard_agent_drift_repairs_total"); (n > repairs) != (b.fix == nil) {
				t.Errorf("drift repairs %v -> %v: want one only when the agent's rules were changed", repairs, n)
			}
			if code, body := e.healthz(ctx, e.c.Topo.Node(1)); code != 200 {
				t.Errorf("node-1, untouched: %d %s", code, body)
			}
		})
	}
}

// datapathBreaks are mode's breaks. The ipvs mode has only the foreign
// DROP: the others are repaired by the agent's drift check, which that
// mode does not have (dataplane/ipvs implements no DriftChecker).
func datapathBreaks(mode, vip string) []datapathBreak {
	// raw OUTPUT runs before nat OUTPUT's DNAT, which rewrites the
	// destination (and before IPVS, which takes the packet at LOCAL_OUT
	// after nat): a DROP of the cluster IP in filter OUTPUT would never
	// see it.
	drop := func(op string) []string {
		return []string{"iptables", "-t", "raw", op, "OUTPUT", "-d", vip + "/32", "-p", "tcp", "-m", "comment", "--comment", "foreign", "-j", "DROP"}
	}
	switch mode {
	case modeIPVS:
		return []datapathBreak{{name: "foreign-drop", brk: [][]string{drop("-I")}, fix: [][]string{drop("-D")}}}
	case modeIPTables:
		return []datapathBreak{
			{name: "foreign-drop", brk: [][]string{drop("-I")}, fix: [][]string{drop("-D")}},
			{name: "nat-flushed", brk: [][]string{{"iptables", "-t", "nat", "-F"}}},
		}
	}
	return []datapathBreak{
		// A foreign table's base chain at priority raw (-300), before the
		// agent's dstnat chains.
		{name: "foreign-drop",
			brk: [][]string{{"nft", "add", "table", "ip", "foreign-canary"},
				{"nft", "add", "chain", "ip", "foreign-canary", "out", "{", "type", "filter", "hook", "output", "priority", "raw", ";", "}"},
				{"nft", "add", "rule", "ip", "foreign-canary", "out", "ip", "daddr", vip, "drop"}},
			fix: [][]string{{"nft", "delete", "table", "ip", "foreign-canary"}}},
		{name: "table-flushed", brk: [][]string{{"nft", "flush", "table", "ip", "switchyard"}}},
	}
}

// reserveCanary creates the selector-less Service that keeps the
// canary's cluster IP from other Services, as the README tells
// operators, and deletes it when the test ends.
func reserveCanary(t *testing.T, e *env, vip netip.AddrPort) {
	t.Helper()
	ctx, cs := t.Context(), e.c.API.Client()
	_, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: canaryNamespace}}, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: canaryNamespace, Name: canaryService}, Spec: corev1.ServiceSpec{
		ClusterIP: vip.Addr().String(),
		Ports:     []corev1.ServicePort{{Name: "canary", Protocol: corev1.ProtocolTCP, Port: int32(vip.Port())}},
	}}
	if _, err := cs.CoreV1().Services(canaryNamespace).Create(ctx, svc, metav1.CreateOptions{}); err != nil {
		t.Fatalf("reserve the canary's cluster IP: %v", err)
	}
	t.Cleanup(func() {
		err := cs.CoreV1().Services(canaryNamespace).Delete(context.WithoutCancel(ctx), canaryService, metav1.DeleteOptions{})
		if err != nil {
			t.Errorf("delete the canary's reservation: %v", err)
		}
	})
}

// run runs each command in node n's namespace.
func (e *env) run(ctx context.Context, t *testing.T, n netns.Node, cmds [][]string) {
	t.Helper()
	for _, argv := range cmds {
		if out, err := e.c.Topo.Exec(ctx, n.NS, argv...); err != nil {
			t.Fatalf("%s: %v\n%s", strings.Join(argv, " "), err, out)
		}
	}
}

// healthz is node n's agent's /healthz: status code and body.
func (e *env) healthz(ctx context.Context, n netns.Node) (int, string) {
	out, err := e.c.Topo.Exec(ctx, n.NS, "curl", "-s", "-w", "\n%{http_code}", "http://127.0.0.1:10256/healthz")
	if err != nil {
		return 0, fmt.Sprintf("curl: %v: %s", err, out)
	}
	s := strings.TrimSpace(string(out))
	i := strings.LastIndexByte(s, '\n')
	c, _ := strconv.Atoi(s[i+1:])
	return c, strings.TrimSpace(s[:max(i, 0)])
}

// waitHealthz waits until node n's /healthz answers code with a body
// holding want, polling every 20 ms for at most 20 s, and returns that
// body.
func (e *env) waitHealthz(ctx context.Context, t *testing.T, n netns.Node, code int, want string) string {
	t.Helper()
	var body string
	err := pollEvery(ctx, 20*time.Second, 20*time.Millisecond, func() (bool, string) {
		var c int
		c, body = e.healthz(ctx, n)
		return c == code && strings.Contains(body, want), fmt.Sprint(c, " ", body)
	})
	if err != nil {
		t.Fatalf("%s /healthz %d: %v", n.Name, code, err)
	}
	return body
}

// agentMetric sums a metric of node n's agent over its labels.
func (e *env) agentMetric(ctx context.Context, t *testing.T, n netns.Node, name string) float64 {
	t.Helper()
	out, err := e.c.Topo.Exec(ctx, n.NS, "curl", "-sf", "http://127.0.0.1:10249/metrics")
	if err != nil {
		t.Fatalf("agent metrics: %v", err)
	}
	var sum float64
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		l := sc.Text()
		if !strings.HasPrefix(l, name+"{") && !strings.HasPrefix(l, name+" ") {
			continue
		}
		if v, err := strconv.ParseFloat(l[strings.LastIndexByte(l, ' ')+1:], 64); err == nil {
			sum += v
		}
	}
	return sum
}
