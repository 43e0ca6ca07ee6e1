package system_test

import (
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/switchyard-proxy/switchyard/e2e/system"
	"github.com/switchyard-proxy/switchyard/e2e/testbed/netns"
	"github.com/switchyard-proxy/switchyard/e2e/testbed/probe"
	eps "github.com/switchyard-proxy/switchyard/e2e/testbed/slices"
	switchyardv1 "github.com/switchyard-proxy/switchyard/proto/switchyard/v1"
)

// explainCase is one packet asked of AdminService/Explain and then sent
// for real: node is the node whose rules meet it first.
type explainCase struct {
	what string
	from struct {
		ns string
		ip netip.Addr
	}
	node netns.Node
	dst  netip.AddrPort
}

// testExplainAgreesWithTraffic: for a sample of packets — a cluster IP
// from a node and from the client, a port the slices name no endpoint
// for, node ports under externalTrafficPolicy Local with and without a
// local endpoint, and a node reaching its own node port — what Explain
// says the node does (forward to which endpoints, masqueraded or not;
// reject; drop) is what real connections meet.
func testExplainAgreesWithTraffic(t *testing.T, e *env) { explainAgreesWithTraffic(t, e, nil) }

// explainAgreesWithTraffic is testExplainAgreesWithTraffic; answered, when
// not nil, is also given every answer, to check what the mode's own
// traits require of it (see explain_userspace_test.go).
func explainAgreesWithTraffic(t *testing.T, e *env, answered func(t *testing.T, step string, c explainCase, ex *switchyardv1.ExplainResponse)) {
	s := e.createService(t, "sc-explain", corev1.ServiceSpec{
		Type: corev1.ServiceTypeNodePort, ClusterIP: "10.96.1.30",
		ExternalTrafficPolicy: corev1.ServiceExternalTrafficPolicyLocal,
		Ports: []corev1.ServicePort{
			{Name: "http", Protocol: corev1.ProtocolTCP, Port: 80},
			{Name: "idle", Protocol: corev1.ProtocolTCP, Port: 81},
		},
	}, eps.TCP("http", system.TargetPort))
	n0, n1, client := e.c.Topo.Node(0), e.c.Topo.Node(1), e.c.Topo.Client()
	node := func(n netns.Node) struct {
		ns string
		ip netip.Addr
	} {
		return struct {
			ns string
			ip netip.Addr
		}{n.NS, n.IP}
	}
	cl := struct {
		ns string
		ip netip.Addr
	}{client.NS, client.IP}
	cases := []explainCase{
		{"node-0 to the cluster IP", node(n0), n0, s.vip(0)},
		{"client to the cluster IP through node-0", cl, n0, s.vip(0)},
		{"node-1 to a port without endpoints", node(n1), n1, s.vip(1)},
		{"client to node-0's node port", cl, n0, s.nodePort(n0, 0)},
		{"client to node-1's node port", cl, n1, s.nodePort(n1, 0)},
		{"node-0 to its own node port", node(n0), n0, s.nodePort(n0, 0)},
	}
	for _, step := range []struct {
		name string
		pods []netns.Pod
	}{
		{"an endpoint on each node", []netns.Pod{e.pod(0), e.pod(1)}},
		{"node-0 without a local endpoint", []netns.Pod{e.pod(1)}},
	} {
		if err := e.write(t.Context(), s, e.endpoints(step.pods...)...); err != nil {
			t.Fatal(err)
		}
		// Settled alone may still see the views before the write: wait
		// until every node acknowledged a view with the step's endpoints.
		for _, n := range e.c.Topo.Nodes() {
			waitFor(t.Context(), t, n.Name+" applied "+step.name, func() (bool, string) {
				ex, err := e.c.ExplainAt(t.Context(), e.replica, &switchyardv1.ExplainRequest{NodeName: n.Name,
					SourceIp: n.IP.String(), DestinationIp: s.vip(0).Addr().String(), DestinationPort: uint32(s.vip(0).Port())})
				return err == nil && ex.GetApplied() && len(ex.GetEndpoints()) == len(step.pods), fmt.Sprint(ex.GetSummary(), err)
			})
		}
		e.settled(t, "explain")
		for _, c := range cases {
			ex := e.checkExplain(t, step.name, c)
			if answered != nil {
				answered(t, step.name, c, ex)
			}
		}
	}
}

// checkExplain asks Explain, then sends 16 connections and compares; it
// returns Explain's answer.
func (e *env) checkExplain(t *testing.T, step string, c explainCase) *switchyardv1.ExplainResponse {
	t.Helper()
	ctx := t.Context()
	ex, err := e.c.ExplainAt(ctx, e.replica, &switchyardv1.ExplainRequest{
		NodeName: c.node.Name, Protocol: "tcp", SourceIp: c.from.ip.String(),
		DestinationIp: c.dst.Addr().String(), DestinationPort: uint32(c.dst.Port())})
	if err != nil {
		t.Fatal(err)
	}
	if !ex.GetApplied() {
		t.Errorf("%s, %s: Explain answered from a view %s has not applied", step, c.what, c.node.Name)
	}
	res, err := probe.New(e.c.Topo, c.from.ns).TCP(ctx, c.dst, probe.Options{Count: 16, Parallel: 8, Timeout: 400 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	if d := e.trafficDiffers(ex, res, c.from.ip); d != "" {
		t.Errorf("%s, %s (%s -> %s on %s): Explain says %q; traffic: %s\n  traffic: %v clients %v",
			step, c.what, c.from.ip, c.dst, c.node.Name, ex.GetSummary(), d, res, res.Clients)
	} else {
		t.Logf("%s, %s: %s; traffic agrees: %v", step, c.what, ex.GetSummary(), res)
	}
	return ex
}

// trafficDiffers says how real connections disagree with Explain's
// answer, "" when they agree: forward means every attempt answered, by
// exactly the endpoints named, and the client address seen is the
// source's unless masqueraded; reject means every attempt refused or
// reset; drop means every attempt timed out, or every one refused where
// Explain's note says a drain refuses them (drainRefuses: the ipvs mode).
func (e *env) trafficDiffers(ex *switchyardv1.ExplainResponse, res probe.Result, src netip.Addr) string {
	switch ex.GetAction() {
	case switchyardv1.ExplainAction_EXPLAIN_ACTION_FORWARD:
		var want []string
		for _, ep := range ex.GetEndpoints() {
			want = append(want, e.podAt(ep.GetAddress()))
		}
		if !answeredBy(res, want...) {
			return fmt.Sprintf("want answers from exactly %v", want)
		}
		// A node masqueraded to itself may keep its address (the one it
		// leaves by): only a kept client address is a contradiction then.
		kept := res.Clients[src.String()] == res.Attempts
		fromNode := slices.ContainsFunc(e.c.Topo.Nodes(), func(n netns.Node) bool { return n.IP == src })
		if kept == ex.GetMasquerade() && !(fromNode && kept) {
			return fmt.Sprintf("masquerade %t, but the endpoints saw the source address in %d of %d", ex.GetMasquerade(),
				res.Clients[src.String()], res.Attempts)
		}
	case switchyardv1.ExplainAction_EXPLAIN_ACTION_REJECT:
		r := res.Reasons()
		if r[probe.ReasonRefused]+r[probe.ReasonReset] != res.Attempts {
			return fmt.Sprintf("want every attempt refused, got %v", r)
		}
	case switchyardv1.ExplainAction_EXPLAIN_ACTION_DROP:
		if drainRefuses(ex) && res.Reasons()[probe.ReasonRefused] == res.Attempts {
			return "" // as Explain's note says
		}
		if res.Reasons()[probe.ReasonTimeout] != res.Attempts {
			return fmt.Sprintf("want every attempt to time out, got %v", res.Reasons())
		}
	default:
		return "the sample holds no packet Explain passes"
	}
	return ""
}

// drainNote is how Explain's note on an ipvs-mode drop ends when the
// node's own connections are refused instead (dataplane/explain): a
// removed endpoint's virtual server stays while it drains, and IPVS meets
// a connection from the node at LOCAL_OUT, before the filter rule that
// drops it, and refuses it for want of a real server with a weight.
// Explain reads the state, which has no drain in it, so it says so.
const drainNote = "they are refused until the drain ends"

// drainRefuses reports whether Explain's answer says connections that it
// drops are refused while a drain lasts.
func drainRefuses(ex *switchyardv1.ExplainResponse) bool {
	return slices.ContainsFunc(ex.GetNotes(), func(n string) bool { return strings.HasSuffix(n, drainNote) })
}

// podAt names the pod with address ip, or returns ip.
func (e *env) podAt(ip string) string {
	i := slices.IndexFunc(e.c.Topo.Pods(), func(p netns.Pod) bool { return p.IP.String() == ip })
	if i < 0 {
		return ip
	}
	return e.pod(i).Name
}
