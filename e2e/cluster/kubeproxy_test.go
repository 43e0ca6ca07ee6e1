package cluster_test

import (
	"context"
	"io"
	"net"
	"net/http"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/switchyard-proxy/switchyard/e2e/cluster"
	"github.com/switchyard-proxy/switchyard/e2e/cluster/images"
	"github.com/switchyard-proxy/switchyard/e2e/testbed/apiserver"
	"github.com/switchyard-proxy/switchyard/e2e/testbed/netns"
	"github.com/switchyard-proxy/switchyard/e2e/testbed/probe"
)

const kubeProxyNS = "kube-proxy-test"

// TestKubeProxyOnBed runs upstream kube-proxy (iptables mode) as the bed's
// only service proxy, the baseline the conformance comparison runs
// against: it must program the kubernetes VIP (CoreDNS becomes Ready only
// through it), serve healthz and proxyMode on the node address, and carry
// ClusterIP, NodePort and DNS traffic from a pod; then the latency
// harness's smoke run measures it (latencySmoke). It skips unless
// kube-proxy is built (BUILD_KUBE_PROXY=1 hack/testbed-build.sh, which make
// deps does), so a Switchyard-only checkout never needs it.
func TestKubeProxyOnBed(t *testing.T) {
	netns.RequireRoot(t)
	apiserver.Require(t)
	kp, err := cluster.BuildKubeProxyImage(t.Context(), cluster.Config{Logger: netns.TestLogger(t)})
	if images.IsNotBuilt(err) {
		t.Skipf("kube-proxy not built: %v", err)
	}
	if err != nil {
		t.Fatal(err)
	}
	c := cluster.Start(t, cluster.Config{Nodes: 2, Images: []string{kp.Path}})
	ctx := t.Context()
	begin := time.Now()
	if err := c.InstallPinnedDNS(ctx); err != nil {
		t.Fatal(err)
	}
	if err := c.InstallKubeProxy(ctx, cluster.KubeProxyIPTables); err != nil {
		t.Fatal(err)
	}
	t.Logf("kube-proxy rolled out %v after install", time.Since(begin).Round(time.Millisecond))
	kubectl(t, c, "-n", "kube-system", "rollout", "status", "deployment/coredns", "--timeout=3m")
	t.Logf("CoreDNS Ready (it lists Services through the kubernetes VIP) %v after install", time.Since(begin).Round(time.Millisecond))

	for i := range c.Nodes() {
		addr := netip.AddrPortFrom(cluster.NodeIP(i), 10249).String()
		if got := httpGet(t, c, "http://"+addr+"/proxyMode"); got != cluster.KubeProxyIPTables {
			t.Errorf("%s /proxyMode = %q, want iptables", addr, got)
		}
		addr = netip.AddrPortFrom(cluster.NodeIP(i), 10256).String()
		if got := httpGet(t, c, "http://"+addr+"/healthz"); !strings.Contains(got, "lastUpdated") {
			t.Errorf("%s /healthz = %q, want kube-proxy's status", addr, got)
		}
	}

	applyWorkload(t, c, kubeProxyNS, "workload", cluster.EchoWorkload(kubeProxyNS, 3, 0), "pod/client")
	waitFor(t, "3 ready endpoints", time.Minute, func() (bool, error) {
		n, err := c.ReadyEndpoints(ctx, kubeProxyNS, "echo")
		return n == 3, err
	})
	podNS, err := c.PodNetNS(ctx, kubeProxyNS, "client")
	if err != nil {
		t.Fatal(err)
	}
	runner := c.PodRunner(podNS)
	api := netip.AddrPortFrom(cluster.KubernetesVIP, 443)
	waitFor(t, "the kubernetes VIP accepts connections from a pod", time.Minute, func() (bool, error) {
		return dialFrom(runner, api) == nil, nil
	})
	vip, err := c.ServiceAddr(ctx, kubeProxyNS, "echo")
	if err != nil {
		t.Fatal(err)
	}
	// The API's ready endpoints reach the kernel at kube-proxy's next
	// sync; until then its rules REJECT. Wait for that, as for the
	// kubernetes VIP above, before counting.
	waitFor(t, "kube-proxy programs the echo ClusterIP", time.Minute, func() (bool, error) {
		return dialFrom(runner, vip) == nil, nil
	})
	pod := probe.New(runner, "")
	spread(t, pod, "pod → ClusterIP", vip, 60, 3)
	port, err := c.NodePort(ctx, kubeProxyNS, "echo-np")
	if err != nil {
		t.Fatal(err)
	}
	spread(t, pod, "pod → NodePort on the other node", netip.AddrPortFrom(cluster.NodeIP(1), port), 60, 3)
	spread(t, probe.New(c.Topology(), c.NodeNS(1)), "node-1 → ClusterIP", vip, 60, 3)

	r := runner.Resolver(netip.AddrPortFrom(cluster.DNSVIP, 53).String())
	name := "echo." + kubeProxyNS + ".svc.cluster.local"
	addrs, err := r.LookupHost(ctx, name)
	if err != nil || len(addrs) != 1 || addrs[0] != vip.Addr().String() {
		t.Fatalf("DNS %s via %s = %v, %v; want [%s]", name, cluster.DNSVIP, addrs, err, vip.Addr())
	}
	t.Logf("DNS via kube-dns VIP %s: %s = %v", cluster.DNSVIP, name, addrs)

	// The latency harness's kube-proxy side, on this bed.
	latencySmoke(t, c, cluster.Proxy{Name: "kube-proxy-" + cluster.KubeProxyIPTables, Kind: cluster.KindKubeProxy, Mode: cluster.KubeProxyIPTables})
}

// dialFrom opens and closes a TCP connection to addr from the pod.
func dialFrom(r cluster.PodRunner, addr netip.AddrPort) error {
	var dialErr error
	err := r.Do("", func() error {
		conn, err := net.DialTimeout("tcp", addr.String(), 2*time.Second)
		if err == nil {
			conn.Close()
		}
		dialErr = err
		return nil
	})
	if err != nil {
		return err
	}
	return dialErr
}

// httpGet fetches url from the client namespace and returns the body.
func httpGet(t *testing.T, c *cluster.Cluster, url string) string {
	t.Helper()
	client := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{
		DialContext: func(ctx context.Context, _, addr string) (net.Conn, error) { return c.DialContext(ctx, addr) },
	}}
	resp, err := client.Get(url)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	return strings.TrimSpace(string(b))
}
