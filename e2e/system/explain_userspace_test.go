package system_test

import (
	"fmt"
	"testing"

	"github.com/switchyard-proxy/switchyard/e2e/system"
	switchyardv1 "github.com/switchyard-proxy/switchyard/proto/switchyard/v1"
)

// TestExplainUserspace checks AdminService/Explain against real traffic in
// the userspace mode, chosen by the control plane's NodeConfig (--mode
// userspace) while every agent starts with --mode iptables: the same
// sample of packets as TestScenarios' ExplainAgreesWithTraffic, asked with
// the mode unspecified (so Explain answers for the mode the agent
// reports), on the same two nodes and four pods.
//
// The userspace proxy listens in the agent's process on the service
// addresses themselves, which reach it only where they are local: each
// node's namespace gets the service range as a local route, as
// deploy/components/userspace does on a real node (and
// e2e/dataplane/userspace's bed in its one node):
//
//	ip route add local 10.96.0.0/16 dev lo
//
// The client's route to the range goes through node-0, whose local route
// then delivers to its proxy.
func TestExplainUserspace(t *testing.T) {
	e := &env{c: startCluster(t, system.Config{Nodes: 2, Pods: 4, Mode: "userspace"})}
	ctx := t.Context()
	cidr := e.c.Topo.Plan().ServiceCIDR
	for _, n := range e.c.Topo.Nodes() {
		if out, err := e.c.Topo.Exec(ctx, n.NS, "ip", "route", "add", "local", cidr.String(), "dev", "lo"); err != nil {
			t.Fatalf("%s: local route for %s: %v\n%s", n.Name, cidr, err, out)
		}
		waitFor(ctx, t, "ListNodes shows "+n.Name+" in userspace mode", func() (bool, string) {
			m, desc := e.agentMode(ctx, n.Name)
			return m == switchyardv1.DataplaneMode_DATAPLANE_MODE_USERSPACE, desc
		})
		// The switch from the agent's --mode iptables leaves no rule of it.
		e.waitNoLeftovers(ctx, t, n, "iptables")
	}
	// The proxies serve: the cluster's own Service answers from every pod,
	// from each node and from the client (through node-0).
	for _, src := range sources(e.c) {
		waitFor(ctx, t, src.name+" reaches "+e.c.VIP().String()+" through the userspace proxy", func() (bool, string) {
			res, err := e.tcp(ctx, src.ns, e.c.VIP(), 16)
			return err == nil && answeredBy(res, names(e.c.Topo.Pods()...)...), fmt.Sprint(res, err)
		})
	}
	e.settled(t, "userspace")
	t.Run("ExplainAgreesWithTraffic", func(t *testing.T) { explainAgreesWithTraffic(t, e, userspaceAnswer) })
}

// userspaceAnswer checks what the userspace mode's traits
// (dataplane/explain/modes.go) require of every answer, beyond agreeing
// with traffic: it is given for the mode the agents report; it proxies, so
// whatever it forwards the endpoints see from the node's address
// (masquerade); and it refuses instead of dropping (no listener where
// no endpoint is chosen), so it never answers DROP.
func userspaceAnswer(t *testing.T, step string, c explainCase, ex *switchyardv1.ExplainResponse) {
	t.Helper()
	if m := ex.GetMode(); m != switchyardv1.DataplaneMode_DATAPLANE_MODE_USERSPACE {
		t.Errorf("%s, %s: Explain answered for mode %v, want the userspace the agent reports", step, c.what, m)
	}
	switch ex.GetAction() {
	case switchyardv1.ExplainAction_EXPLAIN_ACTION_FORWARD:
		if !ex.GetMasquerade() {
			t.Errorf("%s, %s: Explain says %q without masquerade; the userspace mode proxies (the endpoints see the node's address)",
				step, c.what, ex.GetSummary())
		}
	case switchyardv1.ExplainAction_EXPLAIN_ACTION_DROP:
		t.Errorf("%s, %s: Explain says %q; the userspace mode refuses instead of dropping", step, c.what, ex.GetSummary())
	}
}
