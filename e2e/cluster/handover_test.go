package cluster_test

import (
	"fmt"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/switchyard-proxy/switchyard/e2e/cluster"
	"github.com/switchyard-proxy/switchyard/e2e/cluster/images"
	"github.com/switchyard-proxy/switchyard/e2e/testbed/apiserver"
	"github.com/switchyard-proxy/switchyard/e2e/testbed/netns"
)

const handoverNS = "handover"

// TestRealClusterHandOver moves a node from kube-proxy's DaemonSet to
// Switchyard's and back, the way README's Migrating and Moving back tell
// operators, under traffic (handover_traffic_test.go), in the iptables and
// the nftables modes of both: Switchyard installed with cleanupKubeProxy
// while kube-proxy runs (its agents hand the node to kube-proxy and write
// nothing), then kube-proxy's DaemonSet deleted (the agents take over and
// remove what kube-proxy left); then kube-proxy installed again (the agents
// hand the node back and remove their rules) and Switchyard deleted.
// Nothing of the traffic may fail, and each proxy's rules must be gone
// after the other took over.
func TestRealClusterHandOver(t *testing.T) {
	netns.RequireRoot(t)
	apiserver.Require(t)
	kp, err := cluster.BuildKubeProxyImage(t.Context(), cluster.Config{Logger: netns.TestLogger(t)})
	if images.IsNotBuilt(err) {
		t.Skipf("kube-proxy not built: %v", err)
	}
	if err != nil {
		t.Fatal(err)
	}
	for _, mode := range []string{cluster.KubeProxyIPTables, cluster.KubeProxyNFTables} {
		t.Run(mode, func(t *testing.T) { handOver(t, kp.Path, mode) })
	}
}

func handOver(t *testing.T, kubeProxyImage, mode string) {
	c := cluster.Start(t, cluster.Config{Nodes: 2, Images: []string{kubeProxyImage}})
	ctx := t.Context()
	if err := c.InstallPinnedDNS(ctx); err != nil {
		t.Fatal(err)
	}
	if err := c.InstallKubeProxy(ctx, mode); err != nil {
		t.Fatal(err)
	}
	kubectl(t, c, "-n", "kube-system", "rollout", "status", "deployment/coredns", "--timeout=3m")
	if err := c.Apply(ctx, "hold", holdWorkload(handoverNS)); err != nil {
		t.Fatal(err)
	}
	kubectl(t, c, "-n", handoverNS, "rollout", "status", "deployment/hold", "--timeout=3m")
	kubectl(t, c, "-n", handoverNS, "wait", "pod/client", "--for=condition=Ready", "--timeout=3m")
	waitFor(t, "3 ready endpoints", time.Minute, func() (bool, error) {
		n, err := c.ReadyEndpoints(ctx, handoverNS, "hold")
		return n == 3, err
	})
	podNS, err := c.PodNetNS(ctx, handoverNS, "client")
	if err != nil {
		t.Fatal(err)
	}
	pod := c.PodRunner(podNS)
	vip, err := c.ServiceAddr(ctx, handoverNS, "hold")
	if err != nil {
		t.Fatal(err)
	}
	port, err := c.NodePort(ctx, handoverNS, "hold-np")
	if err != nil {
		t.Fatal(err)
	}
	np := netip.AddrPortFrom(cluster.NodeIP(0), port)
	waitFor(t, "kube-proxy programs the ClusterIP", time.Minute, func() (bool, error) {
		return dialFrom(pod, netip.AddrPortFrom(vip.Addr(), holdNew)) == nil, nil
	})

	// Migrating: Switchyard applied beside the running kube-proxy, then
	// kube-proxy's DaemonSet deleted.
	traffic := startHoldTraffic(t, c, pod, vip.Addr(), np)
	begin := time.Now()
	if err := c.InstallSwitchyardWith(ctx, cluster.OverlayBase, mode, cluster.CleanupKubeProxy); err != nil {
		t.Fatal(err)
	}
	if err := c.WaitSwitchyard(ctx); err != nil {
		t.Fatal(err)
	}
	for i := range c.Nodes() {
		if left := kubeProxyLeft(t, c, i); len(left) == 0 {
			t.Errorf("%s: kube-proxy's rules removed while it runs", cluster.NodeName(i))
		}
	}
	kubectl(t, c, "-n", "kube-system", "delete", "daemonset", "kube-proxy", "--wait=true", "--timeout=2m")
	deleted := time.Now()
	took := waitFor(t, "kube-proxy's rules gone from every node", 2*time.Minute, func() (bool, error) {
		for i := range c.Nodes() {
			if left := kubeProxyLeft(t, c, i); len(left) > 0 {
				return false, fmt.Errorf("%s: %s", cluster.NodeName(i), strings.Join(left, ", "))
			}
		}
		return true, nil
	})
	t.Logf("takeover: Switchyard applied %v, kube-proxy deleted %v later, its rules gone %v after that",
		begin.Format("15:04:05"), deleted.Sub(begin).Round(time.Millisecond), took.Round(time.Millisecond))
	time.Sleep(3 * time.Second) // let the traffic run over the agents' rules alone
	traffic.check(t, "kube-proxy → Switchyard "+mode, true)
	if t.Failed() {
		diagnoseHandOver(t, c)
	}

	// Moving back: kube-proxy applied again, then Switchyard deleted.
	traffic = startHoldTraffic(t, c, pod, vip.Addr(), np)
	begin = time.Now()
	if err := c.InstallKubeProxy(ctx, mode); err != nil {
		t.Fatal(err)
	}
	took = waitFor(t, "Switchyard's rules gone from every node", 2*time.Minute, func() (bool, error) {
		for i := range c.Nodes() {
			if left := switchyardLeft(t, c, i); len(left) > 0 {
				return false, fmt.Errorf("%s: %s", cluster.NodeName(i), strings.Join(left, ", "))
			}
		}
		return true, nil
	})
	t.Logf("hand-back: kube-proxy applied %v, rolled out and Switchyard's rules gone %v later (%v after the rollout)",
		begin.Format("15:04:05"), time.Since(begin).Round(time.Millisecond), took.Round(time.Millisecond))
	if err := c.UninstallSwitchyard(ctx, cluster.OverlayBase); err != nil {
		t.Fatal(err)
	}
	time.Sleep(3 * time.Second) // let the traffic run over kube-proxy's rules alone
	traffic.check(t, "Switchyard "+mode+" → kube-proxy", false)
	if t.Failed() {
		diagnoseHandOver(t, c)
	}
	for i := range c.Nodes() {
		if left := switchyardLeft(t, c, i); len(left) > 0 {
			t.Errorf("%s: Switchyard's rules left after the hand-back: %s", cluster.NodeName(i), strings.Join(left, ", "))
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
