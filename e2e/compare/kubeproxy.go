package compare

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/switchyard-proxy/switchyard/e2e/testbed/launch"
	"github.com/switchyard-proxy/switchyard/e2e/testbed/netns"
)

// Addresses kube-proxy serves on inside its node namespace.
const (
	kubeProxyMetrics = "127.0.0.1:10249"
	kubeProxyHealthz = "127.0.0.1:10256"
)

// kubeProxyArgs are the upstream flags for one node namespace. Every knob
// that would write a machine-wide setting is turned off:
//   - --conntrack-max-per-core=0: leave nf_conntrack_max and the
//     nf_conntrack hashsize module parameter alone (the latter is global,
//     not per namespace);
//   - --conntrack-tcp-timeout-established=0, --conntrack-tcp-timeout-close-wait=0:
//     leave the conntrack timeouts as they are (per namespace, but nothing
//     here needs them);
//   - --oom-score-adj=0: do not make a benchmark process unkillable by the
//     OOM killer on a shared machine (default -999);
//   - --metrics-bind-address / --healthz-bind-address on the namespace's
//     loopback, where nsHTTPClient reaches them.
//
// --cluster-cidr matches the control plane's, so both masquerade the same
// traffic; --iptables-min-sync-period applies to the nftables mode too.
func kubeProxyArgs(bin, mode, kubeconfig string, minSync time.Duration) []string {
	return []string{bin,
		"--kubeconfig=" + kubeconfig,
		"--proxy-mode=" + mode,
		"--hostname-override=" + nodeName,
		"--cluster-cidr=" + clusterCIDR,
		"--metrics-bind-address=" + kubeProxyMetrics,
		"--healthz-bind-address=" + kubeProxyHealthz,
		"--conntrack-max-per-core=0",
		"--conntrack-tcp-timeout-established=0",
		"--conntrack-tcp-timeout-close-wait=0",
		"--oom-score-adj=0",
		"--iptables-min-sync-period=" + minSync.String(),
		"--v=2",
	}
}

// runKubeProxy runs upstream kube-proxy in mode in a fresh node namespace
// and measures it.
func (e *env) runKubeProxy(ctx context.Context, n proxyNode) (err error) {
	rec, log, topo, ns, mode := n.rec, n.log, n.topo, n.ns, n.rec.Mode
	// kube-proxy's kubeconfig names https://127.0.0.1:PORT: serve that very
	// address inside the namespace.
	rl, err := topo.Relay(ns, e.apiAddr, e.apiAddr, log)
	if err != nil {
		return err
	}
	defer rl.Close()

	logPath := filepath.Join(e.dir, fmt.Sprintf("kube-proxy-%s-%d.log", mode, rec.Services))
	logf, err := os.Create(logPath)
	if err != nil {
		return err
	}
	defer logf.Close()
	argv := kubeProxyArgs(e.cfg.KubeProxyBinary, mode, e.api.KubeconfigPath(), e.cfg.MinSyncPeriod)
	start := time.Now()
	p, err := topo.Start(ctx, ns, netns.Cmd{Argv: argv, Stdout: logf, Stderr: logf})
	if err != nil {
		return err
	}
	log.Info("started kube-proxy", "ns", ns, "pid", p.Pid, "log", logPath)
	kp := started{nftTable: "kube-proxy", metrics: kubeProxyMetrics, start: start, alive: exited(p, "kube-proxy", logPath), pid: p.Pid}
	if _, err := e.measureProxy(ctx, n, kp, func(time.Time) {
		log.Info("kube-proxy synced", "seconds", rec.FirstSyncSeconds, "metricSeconds", rec.FirstSyncMetricSeconds)
	}); err != nil {
		return err
	}
	mem, err := launch.ReadMemory(p.Pid)
	if err != nil {
		return err
	}
	rec.RSSBytes, rec.HWMBytes = mem.RSS, mem.Peak
	log.Info("kube-proxy measured", "rssMiB", strconv.FormatFloat(mibf(mem.RSS), 'f', 1, 64),
		"hwmMiB", strconv.FormatFloat(mibf(mem.Peak), 'f', 1, 64))
	return p.Stop(ctx)
}
