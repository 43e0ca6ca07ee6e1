package cluster_test

import (
	"cmp"
	"net"
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/switchyard-proxy/switchyard/e2e/cluster"
	"github.com/switchyard-proxy/switchyard/e2e/testbed/probe"
)

// TestRealClusterDualStack brings up a two-node IPv4/IPv6 bed per mode,
// installs deploy/ and checks, with connections from a pod over IPv6:
// a RequireDualStack ClusterIP answered by every backend in both
// families, a PreferDualStack (IPv6 primary) NodePort on the other node's
// IPv6 and IPv4 addresses, ClientIP affinity on a SingleStack IPv6
// Service, and a SingleStack IPv6 Service without endpoints refused at
// once (REJECT, not a drop that would time out).
func TestRealClusterDualStack(t *testing.T) {
	for _, mode := range []string{"iptables", "nftables"} {
		t.Run(mode, func(t *testing.T) { dualStack(t, mode) })
	}
}

func dualStack(t *testing.T, mode string) {
	c := cluster.Start(t, cluster.Config{Nodes: 2, DualStack: true})
	ctx := t.Context()
	begin := time.Now()
	installSwitchyard(t, c, cluster.OverlayBase, mode)
	settled(t, c)
	t.Logf("bring-up %+v; switchyard (%s) settled %v after install", c.Stats(), mode, time.Since(begin).Round(time.Millisecond))

	applyWorkload(t, c, testNS, "workload-dualstack", cluster.DualStackWorkload(testNS, 3, 0), "pod/client")
	// One IPv4 and one IPv6 EndpointSlice, three ready endpoints each.
	waitFor(t, "6 ready endpoints of "+cluster.DualStackSvc, time.Minute, func() (bool, error) {
		n, err := c.ReadyEndpoints(ctx, testNS, cluster.DualStackSvc)
		return n == 6, err
	})
	ips, err := c.PodIPs(ctx, testNS, "client")
	if err != nil {
		t.Fatal(err)
	}
	if len(ips) != 2 || !ips[0].Is4() || !ips[1].Is6() {
		t.Fatalf("client pod IPs %v: want one IPv4 then one IPv6", ips)
	}
	podNS, err := c.PodNetNS(ctx, testNS, "client")
	if err != nil {
		t.Fatal(err)
	}
	pod := probe.New(c.PodRunner(podNS), "")

	ds := serviceAddrs(t, c, cluster.DualStackSvc, 2)
	if !ds[0].Addr().Is4() || !ds[1].Addr().Is6() {
		t.Fatalf("%s cluster IPs %v: want IPv4 then IPv6", cluster.DualStackSvc, ds)
	}
	programmed := waitFor(t, "agents program 3 IPv6 endpoints", time.Minute, func() (bool, error) {
		res, err := pod.TCP(ctx, ds[1], probe.Options{Count: 30, Timeout: time.Second})
		return err == nil && res.Succeeded() == 30 && len(res.Counts) == 3, err
	})
	t.Logf("IPv6 cluster IP programmed with 3 endpoints %v after the EndpointSlices had them", programmed.Round(time.Millisecond))
	for _, vip := range ds {
		spread(t, pod, "pod → RequireDualStack ClusterIP", vip, 60, 3)
	}

	np6 := serviceAddrs(t, c, cluster.PreferDualStackNodePortSvc, 2)
	if !np6[0].Addr().Is6() {
		t.Fatalf("%s cluster IPs %v: want IPv6 first", cluster.PreferDualStackNodePortSvc, np6)
	}
	port, err := c.NodePort(ctx, testNS, cluster.PreferDualStackNodePortSvc)
	if err != nil {
		t.Fatal(err)
	}
	spread(t, pod, "pod → NodePort on the other node's IPv6 address", netip.AddrPortFrom(cluster.NodeIP6(1), port), 60, 3)
	spread(t, pod, "pod → NodePort on the other node's IPv4 address", netip.AddrPortFrom(cluster.NodeIP(1), port), 60, 3)
	node := probe.New(c.Topology(), c.NodeNS(1))
	spread(t, node, "node-1 → PreferDualStack ClusterIP (IPv6)", np6[0], 60, 3)

	hairpin(t, c, ds[1])
	affinity(t, pod, serviceAddrs(t, c, cluster.IPv6AffinitySvc, 1)[0])
	refused(t, pod, serviceAddrs(t, c, cluster.IPv6NoEndpointsSvc, 1)[0])
	localNodePorts(t, c)
	// Last: it deletes an echo pod.
	udpFlowMoves(t, c, c.PodRunner(podNS), serviceAddrs(t, c, cluster.IPv6UDPSvc, 1)[0])
}

// hairpin connects from an echo pod to the IPv6 cluster IP it backs: the
// connections it balances to itself only work if the node hairpins them
// back onto cbr0 and masquerades them (else the reply would not be
// un-DNATed), so its own name must be among the replies.
func hairpin(t *testing.T, c *cluster.Cluster, vip netip.AddrPort) {
	t.Helper()
	local, err := c.PodsByNode(t.Context(), testNS, "app=echo")
	if err != nil {
		t.Fatal(err)
	}
	var self string
	for _, pods := range local {
		self = cmp.Or(self, pods[0])
	}
	ns, err := c.PodNetNS(t.Context(), testNS, self)
	if err != nil {
		t.Fatal(err)
	}
	res := spread(t, probe.New(c.PodRunner(ns), ""), "echo pod "+self+" → its own IPv6 ClusterIP", vip, 60, 2)
	if res.Counts[self] == 0 {
		t.Fatalf("echo pod %s → %s: %s: never reached itself (hairpin)", self, vip, res)
	}
}

// serviceAddrs returns svc's cluster IPs, wanting n of them.
func serviceAddrs(t *testing.T, c *cluster.Cluster, svc string, n int) []netip.AddrPort {
	t.Helper()
	addrs, err := c.ServiceAddrs(t.Context(), testNS, svc)
	if err != nil {
		t.Fatal(err)
	}
	if len(addrs) != n {
		t.Fatalf("%s cluster IPs %v: want %d", svc, addrs, n)
	}
	return addrs
}

// affinity wants every connection to a ClientIP-affinity Service to reach
// one backend once it answers at all.
func affinity(t *testing.T, pod *probe.Prober, vip netip.AddrPort) {
	t.Helper()
	waitFor(t, "affinity Service answers", time.Minute, func() (bool, error) {
		res, err := pod.TCP(t.Context(), vip, probe.Options{Count: 1, Timeout: time.Second})
		return err == nil && res.Succeeded() == 1, err
	})
	res, err := pod.TCP(t.Context(), vip, probe.Options{Count: 40, Timeout: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if res.Succeeded() != 40 || len(res.Counts) != 1 {
		t.Fatalf("pod → ClientIP-affinity ClusterIP %s: %s: want 40 replies from one backend", vip, res)
	}
	t.Logf("pod → ClientIP-affinity ClusterIP %s: %s", vip, res)
}

// refused wants connections to a Service without endpoints to fail with
// "connection refused" (the proxy's REJECT answers with an ICMPv6 port
// unreachable or a TCP reset) well before their timeout. Before the
// agents programmed the Service its address is unrouted and connections
// time out, so it waits for the first refusal.
func refused(t *testing.T, pod *probe.Prober, vip netip.AddrPort) {
	t.Helper()
	const timeout = 3 * time.Second
	waitFor(t, "no-endpoint Service refuses", time.Minute, func() (bool, error) {
		res, err := pod.TCP(t.Context(), vip, probe.Options{Count: 1, Timeout: timeout})
		return err == nil && res.Reasons()[probe.ReasonRefused] == 1, err
	})
	res, err := pod.TCP(t.Context(), vip, probe.Options{Count: 10, Timeout: timeout})
	if err != nil {
		t.Fatal(err)
	}
	if got := res.Reasons()[probe.ReasonRefused]; got != 10 {
		t.Fatalf("pod → no-endpoint ClusterIP %s: %s: want 10 refused", vip, res)
	}
	// Ten refusals in well under one timeout: nothing waited for a drop.
	if res.Elapsed >= timeout {
		t.Fatalf("pod → no-endpoint ClusterIP %s: 10 refusals took %v (≥ the %v timeout)", vip, res.Elapsed, timeout)
	}
	t.Logf("pod → no-endpoint ClusterIP %s: 10 connections refused in %v", vip, res.Elapsed.Round(time.Microsecond))
}

// localNodePorts sends from the client namespace (outside the cluster: a
// pod's own traffic to a node port is short-circuited to every endpoint,
// as kube-proxy does) to the externalTrafficPolicy Local node port on each
// node's IPv6 address: only that node's echo pods may answer, and a node
// without one must not answer at all.
func localNodePorts(t *testing.T, c *cluster.Cluster) {
	t.Helper()
	ctx := t.Context()
	port, err := c.NodePort(ctx, testNS, cluster.IPv6LocalNodePortSvc)
	if err != nil {
		t.Fatal(err)
	}
	local, err := c.PodsByNode(ctx, testNS, "app=echo")
	if err != nil {
		t.Fatal(err)
	}
	outside := probe.New(c.Topology(), c.ClientNS())
	for i := range c.Nodes() {
		np := netip.AddrPortFrom(cluster.NodeIP6(i), port)
		pods := local[cluster.NodeName(i)]
		what := "client → ETP Local NodePort on " + cluster.NodeName(i)
		if len(pods) == 0 {
			res, err := outside.TCP(ctx, np, probe.Options{Count: 3, Timeout: time.Second})
			if err != nil {
				t.Fatal(err)
			}
			if res.Succeeded() > 0 {
				t.Fatalf("%s %s (no local endpoint): %s: want no answer", what, np, res)
			}
			t.Logf("%s %s (no local endpoint): %s", what, np, res)
			continue
		}
		res := spread(t, outside, what, np, 40, len(pods))
		for name := range res.Counts {
			if !slices.ContainsFunc(pods, func(p string) bool { return strings.EqualFold(p, name) }) {
				t.Fatalf("%s %s: %s answered; the node's pods are %v", what, np, name, pods)
			}
		}
	}
}

// udpFlowMoves holds one UDP flow (one socket, one source port) from the
// client pod to a UDP IPv6 cluster IP, deletes the pod it reached, and
// wants the flow answered by another pod: the agent must delete the
// conntrack entry that DNATs it to the deleted pod, which otherwise lives
// as long as the client keeps sending.
func udpFlowMoves(t *testing.T, c *cluster.Cluster, pod cluster.PodRunner, vip netip.AddrPort) {
	t.Helper()
	var conn net.Conn
	var dialErr error
	if err := pod.Do("", func() error {
		conn, dialErr = net.Dial("udp", vip.String())
		return nil
	}); err != nil || dialErr != nil {
		t.Fatalf("UDP socket in the client pod: %v %v", err, dialErr)
	}
	defer conn.Close()
	exchange := func() (string, error) {
		if err := conn.SetDeadline(time.Now().Add(time.Second)); err != nil {
			return "", err
		}
		if _, err := conn.Write([]byte("probe")); err != nil {
			return "", err
		}
		buf := make([]byte, 256)
		n, err := conn.Read(buf)
		return string(buf[:n]), err
	}
	var first string
	waitFor(t, "UDP cluster IP answers", time.Minute, func() (bool, error) {
		name, err := exchange()
		first = name
		return err == nil, err
	})
	for range 5 {
		if name, err := exchange(); err != nil || name != first {
			t.Fatalf("one UDP flow reached %s then %q (%v)", first, name, err)
		}
	}
	deleted := time.Now()
	kubectl(t, c, "-n", testNS, "delete", "pod", first, "--wait=false")
	var timeouts int
	moved := waitFor(t, "the UDP flow leaves the deleted pod", time.Minute, func() (bool, error) {
		name, err := exchange()
		if err != nil {
			timeouts++
		}
		return err == nil && name != first, err
	})
	t.Logf("UDP flow to %s: %s deleted, the same socket answered by another pod %v later (%d exchanges without a reply meanwhile; %v since the delete)",
		vip, first, moved.Round(time.Millisecond), timeouts, time.Since(deleted).Round(time.Millisecond))
}
