package system_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/switchyard-proxy/switchyard/e2e/system"
	"github.com/switchyard-proxy/switchyard/e2e/testbed/netns"
	"github.com/switchyard-proxy/switchyard/e2e/testbed/probe"
	switchyardv1 "github.com/switchyard-proxy/switchyard/proto/switchyard/v1"
)

// The stream that runs while a mode changes: 50 new connections a second
// from the client through node-0, long enough to cover a restart.
const (
	modeStreamRate     = 50
	modeStreamDuration = 25 * time.Second
)

var modes = map[string]switchyardv1.DataplaneMode{
	"iptables": switchyardv1.DataplaneMode_DATAPLANE_MODE_IPTABLES,
	"nftables": switchyardv1.DataplaneMode_DATAPLANE_MODE_NFTABLES,
	"ipvs":     switchyardv1.DataplaneMode_DATAPLANE_MODE_IPVS,
}

// waitNoLeftovers waits until node n holds nothing of the given mode of
// Switchyard (leftovers).
func (e *env) waitNoLeftovers(ctx context.Context, t *testing.T, n netns.Node, mode string) {
	t.Helper()
	waitFor(ctx, t, "no "+mode+" rule left on "+n.Name, func() (bool, string) {
		left, err := e.leftovers(ctx, n, mode)
		return err == nil && len(left) == 0, fmt.Sprint(len(left), " left: ", left, err)
	})
}

// readBack is a command that shows what a mode of Switchyard leaves on a
// node, and which lines of its output are Switchyard's.
type readBack struct {
	argv []string
	ours func(line string) bool
}

func kubeChain(line string) bool { return strings.Contains(line, "KUBE-") }

// readBacks are each mode's: for iptables every back end and family a
// node may hold rules in, then the ipsets; for nftables the tables.
var readBacks = map[string][]readBack{
	"iptables": {
		{[]string{"iptables-nft-save"}, kubeChain},
		{[]string{"ip6tables-nft-save"}, kubeChain},
		{[]string{"iptables-legacy-save"}, kubeChain},
		{[]string{"ip6tables-legacy-save"}, kubeChain},
		{[]string{"ipset", "list", "-n"}, func(line string) bool { return strings.HasPrefix(line, "KUBE-SWYD-") }},
	},
	"nftables": {
		{[]string{"nft", "list", "tables"}, func(line string) bool { return strings.HasSuffix(line, " switchyard") }},
	},
}

// leftovers lists what the given mode of Switchyard has on node n, read
// back inside its namespace (readBacks), each line after the command
// that showed it: for iptables every line of every back end naming a
// KUBE-* chain (no kubelet or kube-proxy runs in the bed, so they are
// all Switchyard's) and its KUBE-SWYD-* ipsets; for nftables its
// "switchyard" tables.
func (e *env) leftovers(ctx context.Context, n netns.Node, mode string) ([]string, error) {
	rbs, ok := readBacks[mode]
	if !ok {
		return nil, fmt.Errorf("no read-back for mode %q", mode)
	}
	return e.leftoversOf(ctx, n, rbs)
}

// leftoversOf lists the lines of node n's read-backs rbs that are
// Switchyard's, each after the command that showed it.
func (e *env) leftoversOf(ctx context.Context, n netns.Node, rbs []readBack) ([]string, error) {
	var left []string
	for _, rb := range rbs {
		out, err := e.c.Topo.Exec(ctx, n.NS, rb.argv...)
		if err != nil {
			return nil, err
		}
		for line := range strings.SplitSeq(string(out), "\n") {
			if rb.ours(line) {
				left = append(left, rb.argv[0]+": "+line)
			}
		}
	}
	return left, nil
}

// agentMode is node's agent mode as ListNodes shows it.
func (e *env) agentMode(ctx context.Context, node string) (switchyardv1.DataplaneMode, string) {
	nodes, err := e.nodes(ctx)
	if err != nil {
		return 0, err.Error()
	}
	st := nodes[node]
	return st.GetAgent().GetMode(), fmt.Sprintf("mode %v acked %q desired %q", st.GetAgent().GetMode(), short(st.GetAckedVersion()), short(st.GetDesiredVersion()))
}

// TestModeChange changes node-0's mode under a stream of connections
// through it: a restart with the other --mode in both directions (what
// editing `mode:` in the ConfigMap and restarting the DaemonSet does), then
// a runtime switch of every agent by NodeConfig. Each time the old mode's
// rules leave the node, a Service deleted while the agent was down stops
// forwarding, and the stream to a Service that exists throughout loses no
// connection.
func TestModeChange(t *testing.T) {
	e := &env{c: startCluster(t, system.Config{Nodes: 2, Pods: 3})}
	steps := []struct {
		name, from, to, goneIP string
	}{
		{"RestartIPTablesToNFTables", "iptables", "nftables", "10.96.2.1"},
		{"RestartNFTablesToIPTables", "nftables", "iptables", "10.96.2.2"},
	}
	for _, st := range steps {
		if !t.Run(st.name, func(t *testing.T) { testRestartInMode(t, e, st.from, st.to, st.goneIP) }) {
			return
		}
	}
	t.Run("NodeConfigSwitchesEveryAgent", func(t *testing.T) { testNodeConfigSwitch(t, e) })
}

func testRestartInMode(t *testing.T, e *env, from, to, goneIP string) {
	ctx := t.Context()
	node := e.c.Topo.Node(0)
	client := e.c.Topo.Client().NS
	gone := e.webService(t, "gone-"+to, goneIP, e.pod(0), e.pod(1))
	waitFor(ctx, t, "the client reaches "+gone.Namespace+"/"+gone.Name, func() (bool, string) {
		res, err := e.tcp(ctx, client, gone.vip(0), 8)
		return err == nil && answeredBy(res, e.pod(0).Name, e.pod(1).Name), fmt.Sprint(res, err)
	})
	had, err := e.leftovers(ctx, node, from)
	if err != nil || len(had) == 0 {
		t.Fatalf("%s does not run %s before the restart: %v %v", node.Name, from, had, err)
	}

	st := e.startStreamAt(ctx, modeStreamRate, modeStreamDuration)
	time.Sleep(faultAfter) // schedule of the fault, not a wait for a condition
	if err := e.c.KillAgent(0); err != nil {
		t.Fatal(err)
	}
	before, err := e.nodes(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := e.c.API.Client().CoreV1().Services(gone.Namespace).Delete(ctx, gone.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := e.c.Slices.Delete(ctx, gone.Namespace, gone.Name, "a"); err != nil {
		t.Fatal(err)
	}
	waitFor(ctx, t, "the control plane drops the Service from "+node.Name+"'s view", func() (bool, string) {
		now, err := e.nodes(ctx)
		if err != nil {
			return false, err.Error()
		}
		b, n := before[node.Name], now[node.Name]
		return n.GetDesiredVersion() != b.GetDesiredVersion(), fmt.Sprintf("desired %q", short(n.GetDesiredVersion()))
	})
	// While the agent is down its rules stay (static stability): the
	// deleted Service still forwards through them.
	stale, err := e.tcp(ctx, client, gone.vip(0), 5)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("agent down, deleted Service %s: %d/%d connections through %s's %s rules", gone.vip(0), stale.Succeeded(), stale.Attempts, node.Name, from)
	if stale.Succeeded() != stale.Attempts {
		t.Fatalf("the old rules should still forward while the agent is down: %v", stale)
	}

	restart := time.Now()
	if err := e.c.RestartAgentAs(0, to); err != nil {
		t.Fatal(err)
	}
	waitFor(ctx, t, node.Name+" acks in "+to+" mode", func() (bool, string) {
		now, err := e.nodes(ctx)
		if err != nil {
			return false, err.Error()
		}
		m, desc := e.agentMode(ctx, node.Name)
		return reconnected(restart)(nil, now[node.Name]) && m == modes[to], desc
	})
	e.waitNoLeftovers(ctx, t, node, from)
	now, err := e.leftovers(ctx, node, to)
	if err != nil || len(now) == 0 {
		t.Errorf("%s programs nothing in %s mode: %v %v", node.Name, to, now, err)
	}
	t.Logf("%s: %d %s objects (lines of every back end, sets, tables) before the restart, 0 after; %d of %s now", node.Name, len(had), from, len(now), to)
	res, err := probe.New(e.c.Topo, client).TCP(ctx, gone.vip(0), probe.Options{Count: 8, Parallel: 8, Timeout: 300 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("after the restart in %s mode, deleted Service %s: %d attempted, %d failed (%v)", to, gone.vip(0), res.Attempts, len(res.Failures), res.Reasons())
	if !allFailed(res) {
		t.Errorf("the deleted Service still forwards after the restart: %v", res)
	}
	st.check(t, "restart-"+from+"-to-"+to)
	e.settled(t, "restart-"+from+"-to-"+to)
}

// testNodeConfigSwitch restarts the control plane with --mode nftables:
// every agent (node-0 and node-1 run iptables now) switches at runtime,
// ListNodes shows the mode each agent applied, and no iptables rule is
// left on either node.
func testNodeConfigSwitch(t *testing.T, e *env) {
	ctx := t.Context()
	st := e.startStreamAt(ctx, modeStreamRate, modeStreamDuration)
	time.Sleep(faultAfter) // schedule of the fault, not a wait for a condition
	if err := e.c.KillControlPlane(0); err != nil {
		t.Fatal(err)
	}
	e.c.SetMode("nftables")
	if err := e.c.RestartControlPlane(ctx, 0); err != nil {
		t.Fatal(err)
	}
	for _, n := range e.c.Topo.Nodes() {
		waitFor(ctx, t, "ListNodes shows "+n.Name+" in nftables mode", func() (bool, string) {
			m, desc := e.agentMode(ctx, n.Name)
			return m == switchyardv1.DataplaneMode_DATAPLANE_MODE_NFTABLES, desc
		})
		e.waitNoLeftovers(ctx, t, n, "iptables")
		t.Logf("%s: switched to nftables by NodeConfig, 0 iptables rules left", n.Name)
	}
	st.check(t, "nodeconfig-switch")
	e.settled(t, "nodeconfig-switch")
}
