package system

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/switchyard-proxy/switchyard/e2e/testbed/launch"
	"github.com/switchyard-proxy/switchyard/e2e/testbed/netns"
)

// What a takeover from kube-proxy needs of the bed: upstream kube-proxy
// running in a node's namespace, as its DaemonSet pod would before
// Switchyard replaces it, and a node's agent restarted with flags of the
// test's choosing (--cleanup-kube-proxy).

// Addresses upstream kube-proxy serves on inside its node's namespace:
// its default ports, on the namespace's loopback, where the agents of
// this bed serve theirs too (agentArgs), so that the two compete for
// them as they do on a real node.
const (
	KubeProxyHealthz = "127.0.0.1:10256"
	KubeProxyMetrics = "127.0.0.1:10249"
)

// kubeProxyStopGrace is how long Stop lets kube-proxy exit after SIGTERM.
const kubeProxyStopGrace = 5 * time.Second

// KubeProxy is upstream kube-proxy running in one node's namespace.
type KubeProxy struct {
	Mode    string
	LogPath string
	proc    *launch.Process
	relay   *netns.Relay
	http    *http.Client
}

// kubeProxyArgs are upstream's flags for node. Every knob that would write
// a machine-wide setting is off (as in e2e/compare): no conntrack table
// size or timeouts (nf_conntrack's hashsize is global), no OOM score.
// --cluster-cidr is the control plane's, so that both proxies masquerade
// the same traffic.
func kubeProxyArgs(bin, mode, kubeconfig, node string) []string {
	return []string{bin,
		"--kubeconfig=" + kubeconfig,
		"--proxy-mode=" + mode,
		"--hostname-override=" + node,
		"--cluster-cidr=" + clusterCIDR,
		"--metrics-bind-address=" + KubeProxyMetrics,
		"--healthz-bind-address=" + KubeProxyHealthz,
		"--conntrack-max-per-core=0",
		"--conntrack-tcp-timeout-established=0",
		"--conntrack-tcp-timeout-close-wait=0",
		"--oom-score-adj=0",
		"--v=2",
	}
}

// StartKubeProxy runs bin, upstream kube-proxy, in mode ("iptables" or
// "nftables") in node i's namespace, as node i. It returns once the
// process started; Synced says when it has programmed the node. The
// caller stops it (Stop); Close of the topology kills it otherwise.
func (c *Cluster) StartKubeProxy(i int, bin, mode string) (_ *KubeProxy, err error) {
	n := c.Topo.Node(i)
	u, err := url.Parse(c.API.URL())
	if err != nil {
		return nil, err
	}
	// The kubeconfig names https://127.0.0.1:PORT, which the namespace
	// cannot reach: serve that very address inside it.
	rl, err := c.Topo.Relay(n.NS, u.Host, u.Host, c.log)
	if err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			rl.Close()
		}
	}()
	k := &KubeProxy{Mode: mode, LogPath: filepath.Join(c.dir, "kube-proxy-"+n.Name+".log"), relay: rl,
		http: c.Topo.HTTPClient(n.NS, 2*time.Second)}
	if k.proc, err = launch.Start(c.Topo.Guard(), launch.Spec{Name: "kube-proxy " + n.Name,
		Argv:  kubeProxyArgs(bin, mode, c.API.KubeconfigPath(), n.Name),
		NetNS: "/run/netns/" + n.NS, LogPath: k.LogPath}); err != nil {
		return nil, err
	}
	c.log.Info("started kube-proxy", "node", n.Name, "mode", mode, "pid", k.proc.Pid(), "log", k.LogPath)
	return k, nil
}

// Pid is kube-proxy's process id.
func (k *KubeProxy) Pid() int { return k.proc.Pid() }

// Synced reports whether kube-proxy has programmed the node: its first
// sync is done (kubeproxy_sync_proxy_rules_last_timestamp_seconds is
// set) and its /healthz answers 200, with what it answered. /healthz
// alone is not enough: it answers 200 from the start, before the first
// sync, while nothing is queued. A kube-proxy that exited never syncs:
// the error says so, with its log's tail.
func (k *KubeProxy) Synced(ctx context.Context) (bool, string, error) {
	if done, err := k.proc.Exited(); done {
		return false, "", fmt.Errorf("%w; log:\n%s", err, k.proc.Tail(30))
	}
	m, err := launch.ScrapeMetrics(ctx, k.http, "http://"+KubeProxyMetrics+"/metrics")
	if err != nil {
		return false, err.Error(), nil
	}
	const lastSync = "kubeproxy_sync_proxy_rules_last_timestamp_seconds"
	if m[lastSync]+m[lastSync+`{ip_family="IPv4"}`] == 0 {
		return false, "no sync yet", nil
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+KubeProxyHealthz+"/healthz", nil)
	if err != nil {
		return false, "", err
	}
	resp, err := k.http.Do(req)
	if err != nil {
		return false, err.Error(), nil
	}
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 1024))
	_ = resp.Body.Close()
	return resp.StatusCode == http.StatusOK, fmt.Sprintf("synced; /healthz %s: %s", resp.Status, strings.TrimSpace(string(body))), nil
}

// Stop sends kube-proxy SIGTERM, as deleting its DaemonSet does: its
// rules stay in the node's kernel. It waits until it has exited.
// Idempotent.
func (k *KubeProxy) Stop() error {
	err := k.proc.Stop(kubeProxyStopGrace)
	k.relay.Close()
	return err
}

// Log returns kube-proxy's output so far.
func (k *KubeProxy) Log() string { return readLog(k.LogPath) }

// RestartAgentWith starts node i's agent again after KillAgent, in mode
// and with extra flags after the usual ones (agentArgs), keeping its
// state directory: what a DaemonSet whose pod spec changed does to a
// node. A later RestartAgent starts it without the extra flags.
func (c *Cluster) RestartAgentWith(i int, mode string, extra ...string) error {
	a := c.agents[i]
	if a.proc.Alive() == nil {
		return fmt.Errorf("agent on %s is still running", a.node.Name)
	}
	a.mode = mode
	if err := os.MkdirAll(a.state, 0o700); err != nil {
		return err
	}
	argv, err := c.agentArgs(a)
	if err != nil {
		return err
	}
	argv = append(argv, extra...)
	p, err := launch.Start(c.Topo.Guard(), launch.Spec{Name: "switchyard-agent " + a.node.Name, Argv: argv,
		NetNS: "/run/netns/" + a.node.NS, LogPath: a.logPath})
	if err != nil {
		return fmt.Errorf("start agent on %s: %w", a.node.Name, err)
	}
	c.log.Info("started switchyard-agent", "node", a.node.Name, "ns", a.node.NS, "pid", p.Pid(), "extra", extra)
	a.proc = p
	return nil
}
