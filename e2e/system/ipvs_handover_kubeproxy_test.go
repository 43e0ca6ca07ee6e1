package system_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/switchyard-proxy/switchyard/e2e/system"
)

// fromKubeProxy replaces upstream kube-proxy's ipvs mode on node-0 by
// Switchyard's nftables mode under the load. The settings say nftables
// first (node-1 follows; its IPVS drains meanwhile, with no traffic);
// node-0 is made bare (agent stopped, `switchyard-agent --cleanup
// --cleanup-kube-proxy`) and runs kube-proxy until it forwards. Under the
// load kube-proxy stops (SIGTERM, as deleting its DaemonSet does: its
// IPVS stays and forwards), and the agent starts in nftables mode with
// --cleanup-kube-proxy: it leaves the node to kube-proxy's state until
// kube-proxy's health port stayed silent, then programs it and removes
// kube-proxy's state, which must let kube-proxy's IPVS connections drain
// first.
func (b *handOverBed) fromKubeProxy(t *testing.T) handOverRow {
	ctx := t.Context()
	r := handOverRow{transition: "kube-proxy ipvs → Switchyard nftables (node-0, --cleanup-kube-proxy)"}
	if err := b.e.c.PutSettings(ctx, "mode: nftables\n"); err != nil {
		t.Fatal(err)
	}
	for _, n := range b.e.c.Topo.Nodes() {
		b.waitMode(t, n, "nftables")
	}
	if err := b.e.c.KillAgent(0); err != nil {
		t.Fatal(err)
	}
	if out, err := b.e.c.RunAgentCleanup(ctx, 0, "--cleanup-kube-proxy"); err != nil {
		t.Fatalf("--cleanup --cleanup-kube-proxy: %v\n%s", err, out)
	}
	logFrom := len(b.e.c.AgentLogs(0))
	kp := b.startKubeProxyIPVS(t)
	b.setIPVSTimeouts(t, b.node)

	ld := b.startLoad(t)
	tl := timeline{{name: "kube-proxy ipvs alone", from: ld.start}}
	time.Sleep(handOverWarmup) // schedule, not a wait for a condition
	tl.mark("kube-proxy stopped, its IPVS left")
	if err := kp.Stop(); err != nil {
		t.Fatal(err)
	}
	time.Sleep(takeoverGap) // schedule, not a wait for a condition
	tl.mark("agent starting (nftables, --cleanup-kube-proxy)")
	start := time.Now()
	if err := b.e.c.RestartAgentWith(0, "nftables", "--cleanup-kube-proxy"); err != nil {
		t.Fatal(err)
	}
	b.waitAcked(t, start, "nftables")
	waitFor(ctx, t, b.node.Name+" programs its nftables table", func() (bool, string) {
		out, err := b.e.c.Topo.Exec(ctx, b.node.NS, "nft", "list", "tables")
		return err == nil && strings.Contains(string(out), "table ip switchyard"), fmt.Sprint(string(out), err)
	})
	r.switched = time.Since(start)
	tl.mark("Switchyard nftables forwards, kube-proxy's IPVS draining")
	acked := b.ipvsScheduled(t)
	time.Sleep(handOverTail) // schedule, not a wait for a condition
	created, where := scheduledSince(acked, b.ipvsScheduled(t))
	r.ipvsNew = fmt.Sprint(created)
	if created > 0 {
		t.Errorf("IPVS scheduled %d new connections after Switchyard's nftables mode took node-0 over (%s); IPVS's connections on %s now:\n%s",
			created, where, b.node.Name, b.ipvsConnSample(t))
	}
	stopped := b.stopLoad(t, ld, tl, &r)
	r.drain = b.waitNoIPVS(t, stopped)
	r.left = b.ipvsNow(t)
	out, err := b.e.c.Topo.Exec(ctx, b.node.NS, "iptables-save")
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(out), "KUBE-PROXY-CANARY") {
		t.Errorf("kube-proxy's canary chain left on %s", b.node.Name)
		r.left += "; kube-proxy's canary chain"
	}
	t.Logf("agent log on kube-proxy and its ports:\n%s", strings.Join(agentLines(b.e.c.AgentLogs(0)[logFrom:]), "\n"))
	return r
}

// startKubeProxyIPVS runs kube-proxy's ipvs mode on the bare node-0 until
// it forwards every target, and checks its IPVS state is there.
func (b *handOverBed) startKubeProxyIPVS(t *testing.T) *system.KubeProxy {
	t.Helper()
	ctx := t.Context()
	start := time.Now()
	kp := b.runKubeProxy(t, "ipvs")
	b.waitForwards(t, "kube-proxy's ipvs mode")
	l, err := b.e.readIPVS(ctx, b.node)
	if err != nil {
		t.Fatal(err)
	}
	if len(l.virtualServers) == 0 || !l.link {
		t.Fatalf("kube-proxy's ipvs mode forwards but %s holds %s", b.node.Name, l)
	}
	t.Logf("kube-proxy ipvs (pid %d) forwards %v after its start; %s holds %s", kp.Pid(), time.Since(start).Round(time.Millisecond), b.node.Name, l)
	return kp
}

// ipvsConnSample is the start of IPVS's connection table on the
// taken-over node (`ipvsadm -Lnc`): which clients and states IPVS still
// schedules, when it should schedule none.
func (b *handOverBed) ipvsConnSample(t *testing.T) string {
	t.Helper()
	out, err := b.e.c.Topo.Exec(t.Context(), b.node.NS, "ipvsadm", "-Lnc")
	if err != nil {
		return fmt.Sprintf("ipvsadm -Lnc: %v", err)
	}
	lines := strings.Split(string(out), "\n")
	return strings.Join(lines[:min(len(lines), 40)], "\n")
}
