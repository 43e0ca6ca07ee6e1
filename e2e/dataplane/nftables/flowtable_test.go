package nftables

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/netip"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/vishvananda/netlink"

	"github.com/switchyard-proxy/switchyard/dataplane"
	"github.com/switchyard-proxy/switchyard/e2e/dataplane/dptest"
	"github.com/switchyard-proxy/switchyard/e2e/testbed/netns"
	switchyardv1 "github.com/switchyard-proxy/switchyard/proto/switchyard/v1"
)

// The flowtable fast path (NodeConfig.flowtable_interfaces) against a
// real kernel. This machine's kernel has no flowtables
// (CONFIG_NF_FLOW_TABLE unset): there TestFlowtableWithoutKernelSupport
// runs and TestFlowtableFastPath skips. Inside the QEMU guest (Debian's
// kernel, nf_flow_table as modules) it is the other way round:
//
//	flock /tmp/switchyard-qemu.lock hack/qemu-kernel.sh run nftables.test -test.run Flowtable -test.v
//
// (the e2e/dataplane/nftables test binary, built with CGO_ENABLED=0).

// flowtableProbe asks the node namespace's kernel for a flowtable
// (nft --check: nothing is created); nil when it has them.
func flowtableProbe(t *testing.T, b *bed) error {
	t.Helper()
	_, err := b.Runner.Run(t.Context(), []string{"nft", "--check", "-f", "-"},
		[]byte("add table ip swyd-probe\nadd flowtable ip swyd-probe f { hook ingress priority 0 ; }\n"))
	return err
}

// nodeLinks are the names of the node namespace's interfaces, as the
// agent's link watch reports them.
func nodeLinks(t *testing.T, b *bed) []string {
	t.Helper()
	var names []string
	err := b.Topo.Do(b.Node.NS, func() error {
		links, err := netlink.LinkList()
		for _, l := range links {
			names = append(names, l.Attrs().Name)
		}
		return err
	})
	if err != nil {
		t.Fatalf("links of %s: %v", b.Node.NS, err)
	}
	return names
}

// withFlowtable returns an apply that turns the setting on (every
// interface but loopback) in each state it programs.
func (b *bed) withFlowtable(t *testing.T) func(*testing.T, *dataplane.State) {
	links := nodeLinks(t, b)
	return func(t *testing.T, st *dataplane.State) {
		t.Helper()
		st.Config.FlowtableInterfaces, st.Links = []string{"*"}, links
		b.apply(t, st)
	}
}

// TestFlowtableWithoutKernelSupport: on a kernel that refuses
// flowtables, the setting is a counted skip and services forward as
// without it.
func TestFlowtableWithoutKernelSupport(t *testing.T) {
	b := newBed(t)
	if err := flowtableProbe(t, b); err == nil {
		t.Skip("this kernel has flowtables: TestFlowtableFastPath covers it")
	}
	apply := b.withFlowtable(t)
	vip := b.VIP()
	apply(t, dptest.State(b.Node, dptest.Service("web", vip.Addr().String(), 80, 30080, b.Pods...)))
	if s := b.dp.LastSync(); !s.FlowtableSkipped {
		t.Errorf("LastSync().FlowtableSkipped = false on a kernel without flowtables")
	}
	b.CheckAnsweredBy(t, b.Topo.Client().NS, vip, 60, 3, "cluster IP with the flowtable setting on a kernel without flowtables")
	out, err := b.Runner.Run(t.Context(), []string{"nft", "list", "ruleset"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(out), "flowtable") {
		t.Errorf("a flowtable was programmed:\n%s", out)
	}
}

// requireFlowtables skips unless the node's kernel has flowtables.
func requireFlowtables(t *testing.T, b *bed) {
	t.Helper()
	if err := flowtableProbe(t, b); err != nil {
		t.Skipf("the kernel has no flowtables (run in the QEMU guest, see the file's comment): %v", err)
	}
}

// pingPort is where pingServer listens in every pod.
const pingPort = 9000

// pingServer serves, in a pod namespace, connections that first get
// "<pod name>\n" and then have every byte echoed: one connection can
// carry many round trips and tell which pod it reached.
func pingServer(t testing.TB, topo *netns.Topology, pod netns.Pod) {
	t.Helper()
	var ln net.Listener
	err := topo.Do(pod.NS, func() error {
		var err error
		ln, err = net.Listen("tcp", fmt.Sprintf(":%d", pingPort))
		return err
	})
	if err != nil {
		t.Fatalf("ping server in %s: %v", pod.NS, err)
	}
	var wg sync.WaitGroup
	t.Cleanup(func() { _ = ln.Close(); wg.Wait() })
	wg.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			wg.Go(func() {
				defer func() { _ = c.Close() }()
				if _, err := io.WriteString(c, pod.Name+"\n"); err == nil {
					_, _ = io.Copy(c, c)
				}
			})
		}
	})
}

// pingConn is one connection to a ping service.
type pingConn struct {
	c    net.Conn
	r    *bufio.Reader
	name string
}

func dialPing(t testing.TB, topo *netns.Topology, ns string, to netip.AddrPort) *pingConn {
	t.Helper()
	var c net.Conn
	if err := topo.Do(ns, func() error {
		var err error
		c, err = net.DialTimeout("tcp", to.String(), 2*time.Second)
		return err
	}); err != nil {
		t.Fatalf("dial %s: %v", to, err)
	}
	t.Cleanup(func() { _ = c.Close() })
	p := &pingConn{c: c, r: bufio.NewReader(c)}
	_ = c.SetDeadline(time.Now().Add(5 * time.Second))
	name, err := p.r.ReadString('\n')
	if err != nil {
		t.Fatalf("greeting from %s: %v", to, err)
	}
	p.name = strings.TrimSpace(name)
	return p
}

// roundTrips sends n one-byte round trips and returns their times.
func (p *pingConn) roundTrips(n int) ([]time.Duration, error) {
	out := make([]time.Duration, 0, n)
	b := []byte{'x'}
	for range n {
		_ = p.c.SetDeadline(time.Now().Add(2 * time.Second))
		t0 := time.Now()
		if _, err := p.c.Write(b); err != nil {
			return out, err
		}
		if _, err := io.ReadFull(p.r, b); err != nil {
			return out, err
		}
		out = append(out, time.Since(t0))
	}
	return out, nil
}

// conntrackLines are the node's conntrack entries (conntrack -L) that
// contain every one of match.
func conntrackLines(t testing.TB, b *bed, match ...string) []string {
	t.Helper()
	out, err := b.Runner.Run(t.Context(), []string{"conntrack", "-L"}, nil)
	if err != nil {
		t.Fatalf("conntrack -L: %v", err)
	}
	var lines []string
next:
	for _, l := range strings.Split(string(out), "\n") {
		for _, m := range match {
			if !strings.Contains(l, m) {
				continue next
			}
		}
		lines = append(lines, l)
	}
	return lines
}

// pingService is a cluster IP service on vip:80 → pods:pingPort.
func pingService(vip netip.Addr, pods ...netns.Pod) *switchyardv1.ServiceView {
	sv := dptest.Service("ping", vip.String(), 80, 0, pods...)
	sv.Type = switchyardv1.ServiceType_SERVICE_TYPE_CLUSTER_IP
	sv.Ports[0].NodePort = 0
	for _, ep := range sv.ClusterEndpoints {
		ep.Ports[0].Port = pingPort
	}
	return sv
}

// TestFlowtableFastPath: with the setting on, the mode's checks that
// carry real traffic still pass; an established Service flow is
// offloaded (conntrack shows [OFFLOAD]) and keeps forwarding through an
// endpoint's removal exactly as without the flowtable; the setting off
// removes the flowtable while the flow goes on.
func TestFlowtableFastPath(t *testing.T) {
	b := newBedFor(t, dataplane.IPv4, true)
	requireFlowtables(t, b)
	apply := b.withFlowtable(t)

	t.Run("checks", func(t *testing.T) {
		b.CheckClusterIPAndNodePort(t, apply)
		b.CheckAffinity(t, apply)
		b.CheckNoEndpointsRefused(t, apply)
		b.CheckHairpin(t, apply)
		b.CheckUDPFlowAfterRemoval(t, netip.AddrPortFrom(dptest.ServiceIP(dataplane.IPv4, 20), 53), apply, true)
	})

	for _, p := range b.Pods {
		pingServer(t, b.Topo, p)
	}
	vip := netip.AddrPortFrom(dptest.ServiceIP(dataplane.IPv4, 30), 80)
	st := dptest.State(b.Node, pingService(vip.Addr(), b.Pods...))
	apply(t, st)
	out, err := b.Runner.Run(t.Context(), []string{"nft", "list", "flowtables"}, nil)
	if err != nil || !strings.Contains(string(out), "devices = {") {
		t.Fatalf("nft list flowtables: %v\n%s", err, out)
	}
	t.Logf("flowtables:\n%s", out)

	client := b.Topo.Client().NS
	conn := dialPing(t, b.Topo, client, vip)
	if _, err := conn.roundTrips(50); err != nil {
		t.Fatalf("round trips: %v", err)
	}
	podIP := ""
	for _, p := range b.Pods {
		if p.Name == conn.name {
			podIP = p.IP.String()
		}
	}
	offloaded := conntrackLines(t, b, "dst="+vip.Addr().String(), "dport=80", "src="+podIP, "[OFFLOAD]")
	if len(offloaded) != 1 {
		t.Fatalf("want the flow to %s (via %s) offloaded; conntrack:\n%s", conn.name, vip,
			strings.Join(conntrackLines(t, b, "dport=80"), "\n"))
	}
	t.Logf("offloaded: %s", offloaded[0])

	// The endpoint the flow reached is removed from the service: as
	// without a flowtable (the control below), the established flow
	// keeps its endpoint and new connections never reach it.
	var rest []netns.Pod
	for _, p := range b.Pods {
		if p.Name != conn.name {
			rest = append(rest, p)
		}
	}
	apply(t, dptest.State(b.Node, pingService(vip.Addr(), rest...)))
	if _, err := conn.roundTrips(20); err != nil {
		t.Fatalf("the established flow after its endpoint's removal: %v", err)
	}
	for range 12 {
		if c := dialPing(t, b.Topo, client, vip); c.name == conn.name {
			t.Fatalf("a new connection reached removed endpoint %s", conn.name)
		} else {
			_ = c.c.Close()
		}
	}

	// The setting off: the flowtable goes, the flow stays.
	st = dptest.State(b.Node, pingService(vip.Addr(), rest...))
	b.apply(t, st)
	out, err = b.Runner.Run(t.Context(), []string{"nft", "list", "flowtables"}, nil)
	if err != nil || strings.Contains(string(out), "fastpath") {
		t.Fatalf("setting off: nft list flowtables: %v\n%s", err, out)
	}
	if _, err := conn.roundTrips(20); err != nil {
		t.Fatalf("the flow after the flowtable went: %v", err)
	}
	if l := conntrackLines(t, b, "src="+podIP, "dport=80", "[OFFLOAD]"); len(l) != 0 {
		t.Errorf("still offloaded after the flowtable went: %q", l)
	}
}

// TestFlowtableOffloadedUDPDeleted records what the kernel does when
// the agent's stale-UDP cleanup deletes the conntrack entry of an
// offloaded flow: the mode offloads TCP only, so a throwaway table of
// the test's own offloads UDP here. Kernels with upstream 9b7c68b3911a
// ("netfilter: ctnetlink: Support offloaded conntrack entry deletion",
// 6.4, backported to Debian's 6.1) delete it and the flowtable ignores
// a dying entry at once, so the flow moves with its next packet; older
// ones refuse (EBUSY, and a flush skips the entry), and the flow would
// stay on the removed endpoint: that is why UDP is not offloaded.
func TestFlowtableOffloadedUDPDeleted(t *testing.T) {
	b := newBedFor(t, dataplane.IPv4, true)
	requireFlowtables(t, b)
	var devs []string
	for _, l := range nodeLinks(t, b) {
		if l != "lo" {
			devs = append(devs, `"`+l+`"`)
		}
	}
	probe := "add table inet swyd-udp-probe\n" +
		"add flowtable inet swyd-udp-probe f { hook ingress priority 0 ; devices = { " + strings.Join(devs, ", ") + " } ; }\n" +
		"add chain inet swyd-udp-probe probe-forward { type filter hook forward priority 10 ; }\n" +
		"add rule inet swyd-udp-probe probe-forward meta l4proto udp ct state established flow add @f\n"
	if _, err := b.Runner.Run(t.Context(), []string{"nft", "-f", "-"}, []byte(probe)); err != nil {
		t.Fatal(err)
	}
	vip := netip.AddrPortFrom(dptest.ServiceIP(dataplane.IPv4, 20), 53)
	applies := 0
	b.CheckUDPFlowAfterRemoval(t, vip, func(t *testing.T, st *dataplane.State) {
		if applies++; applies == 2 { // the removal: the flow must be offloaded by now
			l := conntrackLines(t, b, "udp", "dst="+vip.Addr().String(), "[OFFLOAD]")
			if len(l) != 1 {
				t.Fatalf("the UDP flow is not offloaded: %q", conntrackLines(t, b, "udp"))
			}
			t.Logf("offloaded before the removal: %s", l[0])
		}
		b.apply(t, st)
	}, true)
	t.Logf("after the removal and the cleanup: %q", conntrackLines(t, b, "udp", "dst="+vip.Addr().String()))
}

// TestFlowtableEndpointRemovalControl is TestFlowtableFastPath's
// removal without the flowtable: the same established flow keeps its
// removed endpoint there too, so the fast path changes nothing of it.
func TestFlowtableEndpointRemovalControl(t *testing.T) {
	b := newBedFor(t, dataplane.IPv4, true)
	for _, p := range b.Pods {
		pingServer(t, b.Topo, p)
	}
	vip := netip.AddrPortFrom(dptest.ServiceIP(dataplane.IPv4, 30), 80)
	b.apply(t, dptest.State(b.Node, pingService(vip.Addr(), b.Pods...)))
	conn := dialPing(t, b.Topo, b.Topo.Client().NS, vip)
	var rest []netns.Pod
	for _, p := range b.Pods {
		if p.Name != conn.name {
			rest = append(rest, p)
		}
	}
	b.apply(t, dptest.State(b.Node, pingService(vip.Addr(), rest...)))
	if _, err := conn.roundTrips(20); err != nil {
		t.Fatalf("the established flow after its endpoint's removal (no flowtable): %v", err)
	}
}
