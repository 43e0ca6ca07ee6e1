package cluster_test

import (
	"errors"
	"fmt"
	"net/netip"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/switchyard-proxy/switchyard/e2e/cluster"
	"github.com/switchyard-proxy/switchyard/e2e/cluster/images"
	"github.com/switchyard-proxy/switchyard/e2e/testbed/apiserver"
	"github.com/switchyard-proxy/switchyard/e2e/testbed/netns"
)

const handoverNS = "handover"

// handOverOrder is when the proxy a node leaves stops, relative to the
// one it moves to.
type handOverOrder string

const (
	// stillRunning: the new proxy is applied while the old one runs, then
	// the old one is deleted (README's Migrating and Moving back).
	stillRunning handOverOrder = "running"
	// stoppedFirst: the old proxy's DaemonSet is deleted first, its rules
	// left forwarding, then the new one applied; moving back, README's
	// Uninstalling: agents deleted, kube-proxy applied, then the agent
	// image's --cleanup on every node.
	stoppedFirst handOverOrder = "stopped"
	// restarted: as stillRunning, with the old proxy's pods restarted
	// while the new one waits for them (kube-proxy's health port silent
	// for a few seconds must not look like a kube-proxy gone for good).
	restarted handOverOrder = "restarted"
	// byNode: as stillRunning, but kube-proxy leaves one node at a time
	// and comes back one node at a time: its DaemonSet keeps off the
	// nodes labelled for Switchyard (README's Migrating, node by node).
	byNode handOverOrder = "by-node"
)

// proxyLabel marks the nodes kube-proxy's DaemonSet keeps off in the
// byNode order, as README's Migrating, node by node, does.
const proxyLabel = "switchyard.io/proxy"

// handOverCase is one row of the matrix: the agents' mode and the order,
// on a bed whose kube-proxy runs in its own mode.
type handOverCase struct {
	agents string
	order  handOverOrder
}

func (hc handOverCase) String() string { return hc.agents + "/" + string(hc.order) }

// TestRealClusterHandOver moves nodes from kube-proxy's DaemonSet to
// Switchyard's and back, the way README's Migrating and Moving back tell
// operators, under traffic (handover_traffic_test.go), in the iptables and
// the nftables modes of both: Switchyard installed as shipped (its
// cleanupKubeProxy is on) while kube-proxy runs (its agents hand the node
// to kube-proxy and write nothing), then kube-proxy's DaemonSet deleted
// (the agents take over and remove what kube-proxy left); then kube-proxy
// installed again (the agents hand the node back and remove their rules)
// and Switchyard deleted.
// Nothing of the traffic may fail, and each proxy's rules must be gone
// after the other took over. The smoke of TestRealClusterHandOverMatrix.
func TestRealClusterHandOver(t *testing.T) {
	kp := kubeProxyImage(t)
	for _, mode := range []string{cluster.KubeProxyIPTables, cluster.KubeProxyNFTables} {
		t.Run(mode, func(t *testing.T) {
			handOverBed(t, kp, mode, []handOverCase{{mode, stillRunning}})
		})
	}
}

// TestRealClusterHandOverMatrix is issue 35's whole matrix (make
// day-two; SWITCHYARD_DAY2=1): from kube-proxy in either mode to
// Switchyard in either mode and back, with the other proxy still running,
// stopped first, or restarted mid-way. One bed per kube-proxy mode runs
// its cases one after the other: each ends where the next begins, with
// kube-proxy alone on the nodes.
func TestRealClusterHandOverMatrix(t *testing.T) {
	if os.Getenv("SWITCHYARD_DAY2") == "" {
		t.Skip("the day-two matrix runs with SWITCHYARD_DAY2=1 (make day-two); TestRealClusterHandOver is its smoke")
	}
	kp := kubeProxyImage(t)
	for _, mode := range []string{cluster.KubeProxyIPTables, cluster.KubeProxyNFTables} {
		other := cluster.KubeProxyNFTables
		if mode == other {
			other = cluster.KubeProxyIPTables
		}
		t.Run(mode, func(t *testing.T) {
			handOverBed(t, kp, mode, []handOverCase{
				{mode, stillRunning}, {other, stillRunning},
				{mode, stoppedFirst}, {other, stoppedFirst},
				{mode, restarted}, {other, restarted},
				{mode, byNode}, {other, byNode},
			})
		})
	}
}

// kubeProxyImage builds (or finds cached) the bed's kube-proxy image.
func kubeProxyImage(t *testing.T) string {
	t.Helper()
	netns.RequireRoot(t)
	apiserver.Require(t)
	kp, err := cluster.BuildKubeProxyImage(t.Context(), cluster.Config{Logger: netns.TestLogger(t)})
	if images.IsNotBuilt(err) {
		t.Skipf("kube-proxy not built: %v", err)
	}
	if err != nil {
		t.Fatal(err)
	}
	return kp.Path
}

// handOverBed starts a 2-node bed with kube-proxy in mode and the
// workload, then runs cases in order; a failed case ends the bed's run,
// since the next would start from a node in an unknown state.
func handOverBed(t *testing.T, kubeProxyImage, mode string, cases []handOverCase) {
	c := cluster.Start(t, cluster.Config{Nodes: 2, Images: []string{kubeProxyImage}})
	ctx := t.Context()
	if err := c.InstallPinnedDNS(ctx); err != nil {
		t.Fatal(err)
	}
	if err := c.InstallKubeProxy(ctx, mode); err != nil {
		t.Fatal(err)
	}
	kubectl(t, c, "-n", "kube-system", "rollout", "status", "deployment/coredns", "--timeout=3m")
	to := startHold(t, c, handoverNS)
	waitFor(t, "kube-proxy programs the ClusterIP", time.Minute, func() (bool, error) {
		return dialFrom(to.pod, netip.AddrPortFrom(to.vip, holdNew)) == nil, nil
	})
	for _, hc := range cases {
		if !t.Run(hc.String(), func(t *testing.T) { handOver(t, to, mode, hc) }) {
			return
		}
	}
}

// handOver moves the bed's nodes from kube-proxy (in kubeProxyMode) to
// Switchyard and back, as hc says, each direction under its own traffic.
func handOver(t *testing.T, to holdTarget, kubeProxyMode string, hc handOverCase) {
	c, ctx := to.c, t.Context()
	name := fmt.Sprintf("kube-proxy %s → Switchyard %s (%s)", kubeProxyMode, hc.agents, hc.order)
	traffic := to.traffic(t)
	begin := time.Now()
	var stopped, ready time.Time
	if hc.order == stoppedFirst {
		deleteKubeProxy(t, c)
		stopped = time.Now()
		if left := kubeProxyLeftAll(t, c); len(left) == 0 {
			t.Fatal("kube-proxy's rules went with its DaemonSet: the stopped-first case starts from nothing")
		}
	}
	if err := c.InstallSwitchyard(ctx, cluster.OverlayBase, hc.agents); err != nil {
		t.Fatal(err)
	}
	if err := c.WaitSwitchyard(ctx); err != nil {
		t.Fatal(err)
	}
	ready = time.Now()
	if hc.order != stoppedFirst {
		if hc.order == restarted {
			kubectl(t, c, "-n", "kube-system", "rollout", "restart", "daemonset/kube-proxy")
			kubectl(t, c, "-n", "kube-system", "rollout", "status", "daemonset/kube-proxy", "--timeout=3m")
			time.Sleep(4 * time.Second) // a drift check or two of the agents' with kube-proxy back
		}
		for i := range c.Nodes() {
			if len(kubeProxyLeft(t, c, i)) == 0 {
				t.Errorf("%s: kube-proxy's rules removed while it runs", cluster.NodeName(i))
			}
			if left := switchyardLeft(t, c, i); len(left) > 0 {
				t.Errorf("%s: the agent wrote rules while kube-proxy runs: %s", cluster.NodeName(i), strings.Join(left, ", "))
			}
		}
		if hc.order == byNode {
			kubeProxyOffNodes(t, c)
		} else {
			deleteKubeProxy(t, c)
		}
		stopped = time.Now()
	}
	gone := nodesClean(t, c, "kube-proxy's rules gone", begin, kubeProxyLeft)
	if _, err := c.WaitSettled(ctx); err != nil {
		t.Error(err)
	}
	t.Logf("takeover: started %v; kube-proxy deleted at +%v, Switchyard rolled out at +%v, kube-proxy's rules gone at %s",
		begin.Format("15:04:05"), stopped.Sub(begin).Round(time.Millisecond), ready.Sub(begin).Round(time.Millisecond), gone)
	logHandOver(t, c)
	time.Sleep(3 * time.Second) // let the traffic run over the agents' rules alone
	traffic.check(t, name, true)
	if t.Failed() {
		diagnoseHandOver(t, c)
		return
	}

	name = fmt.Sprintf("Switchyard %s → kube-proxy %s (%s)", hc.agents, kubeProxyMode, hc.order)
	traffic = to.traffic(t)
	begin = time.Now()
	switch hc.order {
	case stoppedFirst:
		kubectl(t, c, "-n", cluster.SystemNS, "delete", "daemonset", "switchyard-agent", "--wait=true", "--timeout=2m")
		if err := c.InstallKubeProxy(ctx, kubeProxyMode); err != nil {
			t.Fatal(err)
		}
		cleanupNodes(t, c)
	case byNode:
		kubeProxyBackOnNodes(t, c)
	default:
		if err := c.InstallKubeProxy(ctx, kubeProxyMode); err != nil {
			t.Fatal(err)
		}
		if hc.order == restarted {
			kubectl(t, c, "-n", cluster.SystemNS, "rollout", "restart", "daemonset/switchyard-agent")
			kubectl(t, c, "-n", cluster.SystemNS, "rollout", "status", "daemonset/switchyard-agent", "--timeout=3m")
		}
	}
	gone = nodesClean(t, c, "Switchyard's rules gone", begin, switchyardLeft)
	t.Logf("hand-back: started %v, Switchyard's rules gone at %s", begin.Format("15:04:05"), gone)
	if err := c.UninstallSwitchyard(ctx, cluster.OverlayBase); err != nil {
		t.Fatal(err)
	}
	time.Sleep(3 * time.Second) // let the traffic run over kube-proxy's rules alone
	traffic.check(t, name, false)
	if t.Failed() {
		diagnoseHandOver(t, c)
	}
	for i := range c.Nodes() {
		if left := switchyardLeft(t, c, i); len(left) > 0 {
			t.Errorf("%s: Switchyard's rules left after the hand-back: %s", cluster.NodeName(i), strings.Join(left, ", "))
		}
		if len(kubeProxyLeft(t, c, i)) == 0 {
			t.Errorf("%s: kube-proxy's rules missing after the hand-back", cluster.NodeName(i))
		}
	}
}

// kubeProxyOffNodes keeps kube-proxy's DaemonSet off the nodes labelled
// proxyLabel=switchyard, then labels one node at a time: each agent must
// take its node over while the next node stays kube-proxy's.
func kubeProxyOffNodes(t *testing.T, c *cluster.Cluster) {
	t.Helper()
	kubectl(t, c, "-n", "kube-system", "patch", "daemonset", "kube-proxy", "--type=merge", "-p",
		`{"spec":{"template":{"spec":{"affinity":{"nodeAffinity":{"requiredDuringSchedulingIgnoredDuringExecution":`+
			`{"nodeSelectorTerms":[{"matchExpressions":[{"key":"`+proxyLabel+`","operator":"NotIn","values":["switchyard"]}]}]}}}}}}}`)
	kubectl(t, c, "-n", "kube-system", "rollout", "status", "daemonset/kube-proxy", "--timeout=3m")
	for i := range c.Nodes() {
		kubectl(t, c, "label", "node", cluster.NodeName(i), proxyLabel+"=switchyard")
		took := waitFor(t, cluster.NodeName(i)+" without kube-proxy's rules", 2*time.Minute, func() (bool, error) {
			left := kubeProxyLeft(t, c, i)
			return len(left) == 0, errors.New(strings.Join(left, ", "))
		})
		t.Logf("%s labelled: kube-proxy's rules gone %v later", cluster.NodeName(i), took.Round(time.Millisecond))
		for j := i + 1; j < c.Nodes(); j++ {
			if len(kubeProxyLeft(t, c, j)) == 0 || len(switchyardLeft(t, c, j)) > 0 {
				t.Errorf("%s: taken over before its turn", cluster.NodeName(j))
			}
		}
	}
}

// kubeProxyBackOnNodes removes proxyLabel one node at a time, the last
// labelled first: each agent must hand its node back while the next one
// stays Switchyard's.
func kubeProxyBackOnNodes(t *testing.T, c *cluster.Cluster) {
	t.Helper()
	for i := c.Nodes() - 1; i >= 0; i-- {
		kubectl(t, c, "label", "node", cluster.NodeName(i), proxyLabel+"-")
		took := waitFor(t, cluster.NodeName(i)+" without Switchyard's rules", 2*time.Minute, func() (bool, error) {
			left := switchyardLeft(t, c, i)
			return len(left) == 0, errors.New(strings.Join(left, ", "))
		})
		t.Logf("%s unlabelled: Switchyard's rules gone %v later", cluster.NodeName(i), took.Round(time.Millisecond))
		for j := range i {
			if len(switchyardLeft(t, c, j)) == 0 {
				t.Errorf("%s: handed back before its turn", cluster.NodeName(j))
			}
		}
	}
}

// nodesClean waits until left finds nothing on any node and says when
// each node was first seen clean, from begin: "node-0 +14.2s, node-1
// +15.0s".
func nodesClean(t *testing.T, c *cluster.Cluster, what string, begin time.Time, left func(*testing.T, *cluster.Cluster, int) []string) string {
	t.Helper()
	clean := make([]time.Duration, c.Nodes())
	waitFor(t, what+" on every node", 2*time.Minute, func() (bool, error) {
		var errs []string
		for i := range c.Nodes() {
			if clean[i] > 0 {
				continue
			}
			if l := left(t, c, i); len(l) > 0 {
				errs = append(errs, cluster.NodeName(i)+": "+strings.Join(l, ", "))
				continue
			}
			clean[i] = time.Since(begin)
		}
		return len(errs) == 0, errors.New(strings.Join(errs, "; "))
	})
	for i := range c.Nodes() { // and still clean, every node at once
		if l := left(t, c, i); len(l) > 0 {
			t.Errorf("%s: %s, then back: %s", cluster.NodeName(i), what, strings.Join(l, ", "))
		}
	}
	var b strings.Builder
	for i, d := range clean {
		if i > 0 {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, "%s +%v", cluster.NodeName(i), d.Round(100*time.Millisecond))
	}
	return b.String()
}

// deleteKubeProxy deletes kube-proxy's DaemonSet and waits for its pods.
func deleteKubeProxy(t *testing.T, c *cluster.Cluster) {
	t.Helper()
	kubectl(t, c, "-n", "kube-system", "delete", "daemonset", "kube-proxy", "--wait=true", "--timeout=2m")
	kubectl(t, c, "-n", "kube-system", "wait", "pod", "-l", "k8s-app=kube-proxy", "--for=delete", "--timeout=2m")
}

// kubeProxyLeftAll is kubeProxyLeft of every node, each prefixed with
// its node's name.
func kubeProxyLeftAll(t *testing.T, c *cluster.Cluster) []string {
	t.Helper()
	var all []string
	for i := range c.Nodes() {
		for _, l := range kubeProxyLeft(t, c, i) {
			all = append(all, cluster.NodeName(i)+": "+l)
		}
	}
	return all
}

// cleanupNodes is README's Uninstalling step 3 as printed: the agent
// image's one-shot --cleanup on every node through kubectl debug, then
// each debug pod waited for and its log read (not attached to: the
// cleanup can be done before kubectl attaches, and its lines are lost).
func cleanupNodes(t *testing.T, c *cluster.Cluster) {
	t.Helper()
	image := images.AgentRepo + ":" + cluster.ImageTag
	for i := range c.Nodes() {
		out := kubectl(t, c, "-n", cluster.SystemNS, "debug", "node/"+cluster.NodeName(i), "--profile=sysadmin",
			"--image="+image, "--", "switchyard-agent", "--cleanup", "--state-dir=/host/var/lib/switchyard-agent")
		var pod, container, node string
		if _, err := fmt.Sscanf(out, "Creating debugging pod %s with container %s on node %s", &pod, &container, &node); err != nil {
			t.Fatalf("%s: kubectl debug: %v: %q", cluster.NodeName(i), err, out)
		}
		kubectl(t, c, "-n", cluster.SystemNS, "wait", "pod/"+pod, "--for=jsonpath={.status.phase}=Succeeded", "--timeout=2m")
		if log := kubectl(t, c, "-n", cluster.SystemNS, "logs", pod); !strings.Contains(log, "cleanup complete") {
			t.Errorf("%s: switchyard-agent --cleanup:\n%s", cluster.NodeName(i), log)
		}
	}
}

// kubeProxyLeft lists kube-proxy's evidence on node i: its canary chain in
// either back end and family, its nftables tables.
func kubeProxyLeft(t *testing.T, c *cluster.Cluster, i int) []string {
	t.Helper()
	var left []string
	for _, save := range []string{"iptables-nft-save", "ip6tables-nft-save", "iptables-legacy-save", "ip6tables-legacy-save"} {
		out, err := c.NodeExec(t.Context(), i, save)
		if err != nil {
			continue // a back end the node does not have
		}
		if strings.Contains(string(out), ":KUBE-PROXY-CANARY ") {
			left = append(left, save+" KUBE-PROXY-CANARY")
		}
		if strings.Contains(string(out), ":KUBE-SEP-") {
			// Neither proxy's iptables mode makes one here but
			// kube-proxy's (Switchyard only with ClientIP affinity).
			left = append(left, save+" KUBE-SEP-*")
		}
	}
	return append(left, nftTables(t, c, i, "kube-proxy")...)
}

// switchyardLeft lists what only Switchyard makes on node i: its shard
// and off-cluster chains, its hairpin ipsets, its nftables tables.
func switchyardLeft(t *testing.T, c *cluster.Cluster, i int) []string {
	t.Helper()
	var left []string
	for _, save := range []string{"iptables-nft-save", "ip6tables-nft-save", "iptables-legacy-save", "ip6tables-legacy-save"} {
		out, err := c.NodeExec(t.Context(), i, save)
		if err != nil {
			continue
		}
		for _, name := range []string{":KUBE-SHARD-", ":KUBE-MASQ-OFFCLUSTER "} {
			if strings.Contains(string(out), name) {
				left = append(left, save+" "+strings.TrimSpace(name[1:]))
			}
		}
	}
	if out, err := c.NodeExec(t.Context(), i, "ipset", "list", "-n"); err == nil && strings.Contains(string(out), "KUBE-SWYD-HAIRPIN") {
		left = append(left, "ipset KUBE-SWYD-HAIRPIN")
	}
	return append(left, nftTables(t, c, i, "switchyard")...)
}

// nftTables lists node i's nftables tables called name.
func nftTables(t *testing.T, c *cluster.Cluster, i int, name string) []string {
	t.Helper()
	out, err := c.NodeExec(t.Context(), i, "nft", "list", "tables")
	if err != nil {
		t.Fatalf("%s: nft list tables: %v", cluster.NodeName(i), err)
	}
	var found []string
	for line := range strings.Lines(string(out)) {
		if f := strings.Fields(line); len(f) == 3 && f[2] == name {
			found = append(found, "nftables "+f[1]+" "+name)
		}
	}
	return found
}

// logHandOver logs what the agents said about kube-proxy: when each
// handed its node over, took it back and removed what kube-proxy left.
func logHandOver(t *testing.T, c *cluster.Cluster) {
	t.Helper()
	out, err := c.Kubectl(t.Context(), "-n", cluster.SystemNS, "logs", "-l", "app.kubernetes.io/name=switchyard-agent", "--prefix", "--tail=-1")
	if err != nil {
		t.Logf("agent logs: %v", err)
		return
	}
	for line := range strings.Lines(string(out)) {
		if strings.Contains(line, "kube-proxy") && strings.Contains(line, "component=syncer") {
			t.Log(strings.TrimSpace(line))
		}
	}
}

// diagnoseHandOver logs what explains a failed phase: the proxies' logs
// and node-0's nat tables in both back ends.
func diagnoseHandOver(t *testing.T, c *cluster.Cluster) {
	t.Helper()
	for _, args := range [][]string{
		{"-n", cluster.SystemNS, "logs", "-l", "app.kubernetes.io/name=switchyard-agent", "--tail=80", "--prefix"},
		{"-n", "kube-system", "logs", "-l", "k8s-app=kube-proxy", "--tail=40", "--prefix"},
	} {
		out, err := c.Kubectl(t.Context(), args...)
		t.Logf("kubectl %s (err %v):\n%s", strings.Join(args, " "), err, out)
	}
	for _, save := range []string{"iptables-nft-save", "iptables-legacy-save"} {
		out, err := c.NodeExec(t.Context(), 0, save, "-t", "nat")
		t.Logf("node-0 %s -t nat (err %v):\n%s", save, err, out)
	}
}
