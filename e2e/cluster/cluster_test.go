package cluster_test

import (
	"context"
	"fmt"
	"net/netip"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/switchyard-proxy/switchyard/e2e/cluster"
	"github.com/switchyard-proxy/switchyard/e2e/cluster/images"
	"github.com/switchyard-proxy/switchyard/e2e/testbed/probe"
)

// TestRealCluster installs deploy/ on a two-node kubelet cluster and checks
// what users see: Switchyard's pods Ready, every agent acked over mTLS from
// the control plane's own CA, no node's stream for the taking, Services
// reachable from pods and nodes, DNS through kube-dns's VIP, EndpointSlices
// of the real controller followed on scale-down; then that agent and
// control-plane restarts and a DaemonSet rolling update lose no connection;
// then the same with cert-manager's certificates (deploy/overlays/mtls).
func TestRealCluster(t *testing.T) {
	c := cluster.Start(t, cluster.Config{Nodes: 2})
	ctx := t.Context()
	begin := time.Now()
	if err := c.InstallPinnedDNS(ctx); err != nil {
		t.Fatal(err)
	}
	installSwitchyard(t, c, cluster.OverlayBase, "")
	t.Logf("switchyard pods Ready %v after install", time.Since(begin).Round(time.Millisecond))
	settled(t, c)
	nobodyTakesANode(t, c)
	kubectl(t, c, "-n", "kube-system", "rollout", "status", "deployment/coredns", "--timeout=3m")
	t.Logf("CoreDNS Ready (it lists Services through the kubernetes VIP) %v after install", time.Since(begin).Round(time.Millisecond))
	t.Logf("bring-up %+v; resident memory: %s", c.Stats(), cluster.FormatMemory(c.Memory()))

	applyWorkload(t, c, testNS, "workload", cluster.EchoWorkload(testNS, 3, 0), "pod/client")
	waitFor(t, "3 ready endpoints", time.Minute, func() (bool, error) { return ready(t, c) == 3, nil })

	vip, err := c.ServiceAddr(ctx, testNS, "echo")
	if err != nil {
		t.Fatal(err)
	}
	podNS, err := c.PodNetNS(ctx, testNS, "client")
	if err != nil {
		t.Fatal(err)
	}
	pod := probe.New(c.PodRunner(podNS), "")
	// The agents batch changes (minSyncPeriod 1s): wait until the three
	// endpoints are programmed, then check the spread.
	programmed := waitFor(t, "agents program 3 endpoints", time.Minute, func() (bool, error) {
		res, err := pod.TCP(ctx, vip, probe.Options{Count: 30, Timeout: time.Second})
		return err == nil && res.Succeeded() == 30 && len(res.Counts) == 3, err
	})
	t.Logf("echo Service programmed with 3 endpoints %v after the EndpointSlice had them", programmed.Round(time.Millisecond))
	spread(t, pod, "pod → ClusterIP", vip, 60, 3)
	port, err := c.NodePort(ctx, testNS, "echo-np")
	if err != nil {
		t.Fatal(err)
	}
	np := netip.AddrPortFrom(cluster.NodeIP(1), port)
	spread(t, pod, "pod → NodePort on the other node", np, 60, 3)
	node := probe.New(c.Topology(), c.NodeNS(1))
	spread(t, node, "node-1 → ClusterIP", vip, 60, 3)
	checkDNS(t, c, podNS, vip.Addr())

	// Scale-down: the EndpointSlice controller drops two endpoints, the
	// control plane sends the change, the agents apply it.
	scaled := time.Now()
	kubectl(t, c, "-n", testNS, "scale", "deployment/echo", "--replicas=1")
	slices := waitFor(t, "EndpointSlice has one ready endpoint", time.Minute, func() (bool, error) {
		return ready(t, c) == 1, nil
	})
	traffic := waitFor(t, "traffic reaches only the remaining pod", time.Minute, func() (bool, error) {
		res, err := pod.TCP(ctx, vip, probe.Options{Count: 20, Timeout: time.Second})
		return err == nil && len(res.Counts) == 1 && res.Succeeded() == 20, err
	})
	t.Logf("scale-down 3→1: EndpointSlice updated %v after kubectl scale, traffic followed %v after (%v total)",
		slices.Round(time.Millisecond), traffic.Round(time.Millisecond), time.Since(scaled).Round(time.Millisecond))
	kubectl(t, c, "-n", testNS, "scale", "deployment/echo", "--replicas=2")
	waitFor(t, "2 ready endpoints", time.Minute, func() (bool, error) { return ready(t, c) == 2, nil })

	disruptions(t, c, pod, vip)
	fromNothing(t, c, pod, vip, podNS)

	// cert-manager's certificates: the overlay replaces the control plane's
	// flags and the agents' CA; both roll out and every agent reconnects
	// with its kubelet's client certificate.
	installSwitchyard(t, c, cluster.OverlayMTLS, "")
	settled(t, c)
	spread(t, pod, "pod → ClusterIP over cert-manager-configured agents", vip, 40, 2)
}

func settled(t *testing.T, c *cluster.Cluster) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	nodes, err := c.WaitSettled(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range nodes {
		t.Logf("AdminService: %s connected rpc=%s desired=%s acked=%s resources=%d", n.GetName(), n.GetRpc(),
			n.GetDesiredVersion(), n.GetAckedVersion(), n.GetResourceCount())
	}
}

// checkDNS resolves the echo Service from the client pod through kube-dns's
// VIP: CoreDNS answers only through Switchyard's rules (VIP → CoreDNS pod,
// and CoreDNS → kubernetes VIP → API server).
func checkDNS(t *testing.T, c *cluster.Cluster, podNS string, want netip.Addr) {
	t.Helper()
	r := c.PodRunner(podNS).Resolver(netip.AddrPortFrom(cluster.DNSVIP, 53).String())
	name := "echo." + testNS + ".svc.cluster.local"
	addrs, err := r.LookupHost(t.Context(), name)
	if err != nil {
		t.Fatalf("DNS %s via %s: %v", name, cluster.DNSVIP, err)
	}
	if len(addrs) != 1 || addrs[0] != want.String() {
		t.Fatalf("DNS %s = %v, want [%s]", name, addrs, want)
	}
	t.Logf("DNS via kube-dns VIP %s: %s = %v", cluster.DNSVIP, name, addrs)
}

// agentPods selects the agents' pods (the DaemonSet's selector in
// deploy/base/agent.yaml).
const agentPods = "app.kubernetes.io/name=switchyard-agent"

// disruptions streams 100 connections/s from the client pod to the
// ClusterIP through each disruption and requires that none fails.
func disruptions(t *testing.T, c *cluster.Cluster, pod *probe.Prober, vip netip.AddrPort) {
	agentOn := func(node string) string {
		return kubectl(t, c, "-n", cluster.SystemNS, "get", "pods", "-l", agentPods,
			"--field-selector", "spec.nodeName="+node, "-o", "jsonpath={.items[0].metadata.name}")
	}
	steps := []struct {
		name string
		do   func()
	}{
		{"kubectl delete pod of the client node's agent", func() {
			kubectl(t, c, "-n", cluster.SystemNS, "delete", "pod", agentOn(cluster.NodeName(0)), "--wait=true")
			kubectl(t, c, "-n", cluster.SystemNS, "rollout", "status", "daemonset/switchyard-agent", "--timeout=3m")
		}},
		{"DaemonSet rolling update (image tag " + cluster.ImageTag + " → " + cluster.AltImageTag + ")", func() {
			kubectl(t, c, "-n", cluster.SystemNS, "set", "image", "daemonset/switchyard-agent", "agent="+images.AgentRef(cluster.AltImageTag))
			kubectl(t, c, "-n", cluster.SystemNS, "rollout", "status", "daemonset/switchyard-agent", "--timeout=3m")
		}},
		{"delete a control-plane pod", func() {
			name := kubectl(t, c, "-n", cluster.SystemNS, "get", "pods", "-l", "app.kubernetes.io/name=switchyard-controlplane",
				"-o", "jsonpath={.items[0].metadata.name}")
			kubectl(t, c, "-n", cluster.SystemNS, "delete", "pod", name, "--wait=true")
			kubectl(t, c, "-n", cluster.SystemNS, "rollout", "status", "deployment/switchyard-controlplane", "--timeout=3m")
		}},
	}
	for _, s := range steps {
		ctx, stop := context.WithCancel(t.Context())
		type outcome struct {
			res probe.Result
			err error
		}
		done := make(chan outcome, 1)
		go func() {
			res, err := pod.Stream(ctx, vip, probe.StreamOptions{Rate: 100, Timeout: 2 * time.Second})
			done <- outcome{res, err}
		}()
		time.Sleep(2 * time.Second) // traffic before the disruption
		began := time.Now()
		s.do()
		settled(t, c)
		took := time.Since(began)
		time.Sleep(2 * time.Second) // and after it
		stop()
		o := <-done
		if o.err != nil {
			t.Fatalf("%s: stream: %v", s.name, o.err)
		}
		t.Logf("%s (%v): %d connections, %d failed, %d skipped: %s", s.name, took.Round(time.Millisecond),
			o.res.Attempts, len(o.res.Failures), o.res.Skipped, o.res)
		if len(o.res.Failures) > 0 || o.res.Succeeded() == 0 {
			t.Errorf("%s: %d of %d connections failed: %v", s.name, len(o.res.Failures), o.res.Attempts, firstFailures(o.res))
		}
	}
}

func firstFailures(r probe.Result) string {
	var b strings.Builder
	for i, f := range r.Failures {
		if i == 5 {
			fmt.Fprintf(&b, " … (%d more)", len(r.Failures)-5)
			break
		}
		b.WriteString(f.String() + "; ")
	}
	return b.String()
}

// fromNothing takes the agents off the nodes, removes every service rule
// and saved view there, then starts every Switchyard pod at once (as after
// a reboot of a cluster where Switchyard is the only proxy): no Service VIP
// works anywhere, so the install must come back through node addresses
// alone.
func fromNothing(t *testing.T, c *cluster.Cluster, pod *probe.Prober, vip netip.AddrPort, podNS string) {
	t.Helper()
	ctx := t.Context()
	// The agents go first: a running agent repairs a flushed ruleset at its
	// next drift check (--drift-check-interval, 5s), which raced the check
	// below (seen in CI: 1 of 3 probes timed out, then the rules were back)
	// and left the nodes not "from nothing" when the pods were deleted.
	const paused = `{"spec":{"template":{"spec":{"nodeSelector":{"switchyard.test/paused":"true"}}}}}`
	kubectl(t, c, "-n", cluster.SystemNS, "patch", "daemonset/switchyard-agent", "--type=merge", "-p", paused)
	waitFor(t, "no agent pod left", 2*time.Minute, func() (bool, error) {
		return kubectl(t, c, "-n", cluster.SystemNS, "get", "pods", "-l", agentPods, "-o", "name") == "", nil
	})
	for i := range c.Nodes() {
		if _, err := c.NodeExec(ctx, i, "nft", "flush", "ruleset"); err != nil {
			t.Fatal(err)
		}
		state, err := c.NodePath(i, "/var/lib/switchyard-agent/view.pb")
		if err != nil {
			t.Fatal(err)
		}
		if err := os.Remove(state); err != nil {
			t.Fatalf("remove %s: %v", state, err)
		}
	}
	if res, _ := pod.TCP(ctx, vip, probe.Options{Count: 3, Timeout: 500 * time.Millisecond}); res.Succeeded() > 0 {
		t.Fatalf("the ClusterIP still answers after the rules were flushed: %s", res)
	}
	began := time.Now()
	kubectl(t, c, "-n", cluster.SystemNS, "patch", "daemonset/switchyard-agent", "--type=json",
		"-p", `[{"op":"remove","path":"/spec/template/spec/nodeSelector"}]`)
	kubectl(t, c, "-n", cluster.SystemNS, "delete", "pods", "-l", "app.kubernetes.io/part-of=switchyard", "--wait=false")
	if err := c.WaitSwitchyard(ctx); err != nil {
		t.Fatal(err)
	}
	settled(t, c)
	back := waitFor(t, "ClusterIP answers again", 2*time.Minute, func() (bool, error) {
		res, err := pod.TCP(ctx, vip, probe.Options{Count: 10, Timeout: time.Second})
		return err == nil && res.Succeeded() == 10, err
	})
	t.Logf("every Switchyard pod deleted on nodes with no service rule and no saved view: all acked and the ClusterIP back %v after the delete (%v after the rollouts)",
		time.Since(began).Round(time.Millisecond), back.Round(time.Millisecond))
	checkDNS(t, c, podNS, vip.Addr())
}
