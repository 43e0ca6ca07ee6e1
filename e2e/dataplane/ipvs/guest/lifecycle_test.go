package guest

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"

	clocktesting "k8s.io/utils/clock/testing"

	"github.com/switchyard-proxy/switchyard/dataplane"
	"github.com/switchyard-proxy/switchyard/dataplane/dataplanetest"
	"github.com/switchyard-proxy/switchyard/dataplane/ipvs"
	"github.com/switchyard-proxy/switchyard/e2e/testbed/echo"
	"github.com/switchyard-proxy/switchyard/e2e/testbed/netns"
	"github.com/switchyard-proxy/switchyard/e2e/testbed/probe"
	switchyardv1 "github.com/switchyard-proxy/switchyard/proto/switchyard/v1"
)

// TestEndpointRemovalDrainsLiveConnection: when an endpoint goes away its
// real server drops to weight 0 and stays while a connection through it is
// open: the connection keeps working (no reset), new connections avoid it,
// and it is deleted once the connection is gone (or the grace period is
// over, whichever the kernel's connection table allows first).
func TestEndpointRemovalDrainsLiveConnection(t *testing.T) {
	b := useBed(t)
	clock := clocktesting.NewFakeClock(time.Now())
	const grace = 10 * time.Minute
	a := b.newAgent(t, func(c *ipvs.Config) { c.Clock, c.GracePeriod = clock, grace })
	key := tcpKey(webVIP, 80)
	addr := netip.AddrPortFrom(webVIP, 80)
	a.apply(t, b.state("rr", svc("web", webVIP, 0, b.pods...)), false)

	var conn net.Conn
	if err := b.topo.Do(b.topo.Client().NS, func() (err error) {
		conn, err = net.DialTimeout("tcp", addr.String(), probeTimeout)
		return err
	}); err != nil {
		t.Fatalf("live connection: %v", err)
	}
	defer conn.Close()
	r := bufio.NewReader(conn)
	name, _, err := echo.ParseReply(readLine(t, conn, r))
	if err != nil {
		t.Fatal(err)
	}
	var gone netns.Pod
	var rest []netns.Pod
	for _, p := range b.pods {
		if p.Name == name {
			gone = p
		} else {
			rest = append(rest, p)
		}
	}
	t.Logf("live connection is on %s; removing its endpoint", name)

	stats := a.apply(t, b.state("rr", svc("web", webVIP, 0, rest...)), false)
	if stats.Draining != 1 {
		t.Fatalf("after removing %s: %d real servers draining, want 1 (%+v)", name, stats.Draining, stats)
	}
	rs, ok := a.realServers(t, key)[backend(gone)]
	if !ok || rs.Weight != 0 || rs.ActiveConns != 1 {
		t.Fatalf("removed real server %s: present=%v %+v, want weight 0 with 1 active connection", backend(gone), ok, rs)
	}
	// The live connection still works.
	fmt.Fprintf(conn, "still-there\n")
	if got := strings.TrimSpace(string(readLine(t, conn, r))); got != "still-there" {
		t.Fatalf("live connection echoed %q after the removal, want still-there", got)
	}
	// New connections avoid the draining pod.
	seq := b.sequence(t, b.topo.Client().NS, addr, 6)
	checkRoundRobin(t, seq, 2)
	if slices.Contains(seq, name) {
		t.Fatalf("new connections reached the draining pod %s: %v", name, seq)
	}
	clock.Step(grace / 2)
	if n, err := a.dp.Drain(t.Context()); err != nil || n != 1 {
		t.Fatalf("Drain with the connection open, before the grace period: %d draining, %v; want 1", n, err)
	}

	conn.Close()
	dataplanetest.Eventually(t, 20*time.Second, "the kernel to see the connection closed", func() bool {
		return a.realServers(t, key)[backend(gone)].ActiveConns == 0
	})
	n, err := a.dp.Drain(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if n == 1 {
		t.Logf("closed connection still counted as inactive (%+v): ending the grace period",
			a.realServers(t, key)[backend(gone)])
		clock.Step(grace)
		if n, err = a.dp.Drain(t.Context()); err != nil {
			t.Fatal(err)
		}
	}
	if _, still := a.realServers(t, key)[backend(gone)]; still || n != 0 {
		t.Fatalf("after the drain: %d draining, real server present=%v; want it deleted", n, still)
	}
}

func readLine(t testing.TB, conn net.Conn, r *bufio.Reader) []byte {
	t.Helper()
	if err := conn.SetReadDeadline(time.Now().Add(probeTimeout)); err != nil {
		t.Fatal(err)
	}
	line, err := r.ReadBytes('\n')
	if err != nil {
		t.Fatalf("read from the live connection: %v (reset?)", err)
	}
	return line
}

// TestServiceRemovalLeavesNothing: removing a service removes its virtual
// servers (cluster IP and node port), its address on kube-ipvs0 and its
// ipset members, and leaves the other service working; Cleanup then
// removes everything of the mode.
func TestServiceRemovalLeavesNothing(t *testing.T) {
	b := useBed(t)
	a := b.newAgent(t, nil)
	goneVIP, keptVIP := netip.MustParseAddr("10.96.0.20"), netip.MustParseAddr("10.96.0.21")
	gone := svc("gone", goneVIP, 30090, b.pods...)
	kept := svc("kept", keptVIP, 0, b.pods...)
	a.apply(t, b.state("rr", gone, kept), false)
	if len(ourLines(b.exec(t, "ipset", "save"), "add", goneVIP.String())) == 0 ||
		len(ourLines(b.exec(t, "ipset", "save"), "add", "30090")) == 0 {
		t.Fatalf("ipsets do not mention %s and 30090 before the removal:\n%s", goneVIP, b.exec(t, "ipset", "save"))
	}
	checkRoundRobin(t, b.sequence(t, b.topo.Client().NS, netip.AddrPortFrom(goneVIP, 80), 3), 3)

	a.apply(t, b.state("rr", kept), false)
	vss, err := a.k.VirtualServers(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	for _, vs := range vss {
		if vs.Key.Addr == goneVIP || vs.Key.Port == 30090 {
			t.Errorf("virtual server %s left after the service was removed", vs.Key)
		}
	}
	addrs := b.nodeLinkAddrs(t, ipvs.DummyInterface)
	if slices.Contains(addrs, goneVIP) || !slices.Contains(addrs, keptVIP) {
		t.Errorf("%s has %v: want %s gone and %s kept", ipvs.DummyInterface, addrs, goneVIP, keptVIP)
	}
	sets := b.exec(t, "ipset", "save")
	if l := append(ourLines(sets, "add", goneVIP.String()), ourLines(sets, "add", "30090")...); len(l) > 0 {
		t.Errorf("ipset members left for the removed service: %q", l)
	}
	res, err := probe.New(b.topo, b.topo.Client().NS).TCP(t.Context(), netip.AddrPortFrom(goneVIP, 80), probe.Options{})
	if err != nil || len(res.Failures) != 1 {
		t.Errorf("removed service still answers: %v %v", res, err)
	}
	checkRoundRobin(t, b.sequence(t, b.topo.Client().NS, netip.AddrPortFrom(keptVIP, 80), 3), 3)

	if err := a.dp.Cleanup(t.Context()); err != nil {
		t.Fatalf("Cleanup: %v", err)
	}
	if vss, err := a.k.VirtualServers(t.Context()); err != nil || len(vss) != 0 {
		t.Errorf("after Cleanup: virtual servers %v (%v)", vss, err)
	}
	if l := b.exec(t, "ip", "-o", "link", "show"); strings.Contains(l, ipvs.DummyInterface) {
		t.Errorf("after Cleanup %s still exists:\n%s", ipvs.DummyInterface, l)
	}
	if l := ourLines(b.exec(t, "ipset", "save")); len(l) > 0 {
		t.Errorf("after Cleanup ipsets remain: %q", l)
	}
	if l := ourLines(b.exec(t, "iptables-save")); len(l) > 0 {
		t.Errorf("after Cleanup iptables chains or rules remain: %q", l)
	}
}

// TestRestartReconcilesWithoutDrop: a new Dataplane (an agent restarted
// after a crash) finds the previous instance's virtual servers, addresses,
// sets and rules, converges on a changed state touching only the
// difference, and traffic to an unchanged service never fails meanwhile.
func TestRestartReconcilesWithoutDrop(t *testing.T) {
	b := useBed(t)
	first := b.newAgent(t, nil)
	staleVIP := netip.MustParseAddr("10.96.0.30")
	var svcs []*switchyardv1.ServiceView
	for i := range 10 {
		svcs = append(svcs, svc(fmt.Sprintf("filler%d", i), netip.AddrFrom4([4]byte{10, 96, 1, byte(i + 1)}), 0, b.pods...))
	}
	web := svc("web", webVIP, 30080, b.pods...)
	first.apply(t, b.state("rr", append([]*switchyardv1.ServiceView{web, svc("stale", staleVIP, 0, b.pods...)}, svcs...)...), false)

	ctx, stop := context.WithCancel(t.Context())
	defer stop()
	type streamed struct {
		res probe.Result
		err error
	}
	done := make(chan streamed, 1)
	go func() {
		res, err := probe.New(b.topo, b.topo.Client().NS).Stream(ctx, netip.AddrPortFrom(webVIP, 80),
			probe.StreamOptions{Rate: 40, Timeout: probeTimeout})
		done <- streamed{res, err}
	}()
	time.Sleep(time.Second) // let traffic flow through the first instance's rules

	// The first instance dies without cleaning up; a new one starts with
	// a state that dropped "stale" and changed filler0's endpoints.
	svcs[0] = svc("filler0", netip.AddrFrom4([4]byte{10, 96, 1, 1}), 0, b.pods[:2]...)
	second := b.newAgent(t, nil)
	stats := second.apply(t, b.state("rr", append([]*switchyardv1.ServiceView{web}, svcs...)...), false)
	t.Logf("first apply of the new instance: %+v", stats)
	if stats.VirtualServersAdded != 0 || stats.RealServersAdded != 0 || stats.AddressesAdded != 0 {
		t.Errorf("the new instance re-created what the old one left: %+v", stats)
	}
	if stats.VirtualServersDeleted != 1 || stats.AddressesDeleted != 1 {
		t.Errorf("want exactly the stale service's virtual server and address deleted: %+v", stats)
	}
	// filler0's removed real server: weight 0, then deleted at once as no
	// connection goes through it.
	if stats.RealServersDeleted != 1 || stats.Draining != 0 {
		t.Errorf("want filler0's removed real server deleted: %+v", stats)
	}
	again := second.apply(t, b.state("rr", append([]*switchyardv1.ServiceView{web}, svcs...)...), false)
	if again != (dataplane.SyncStats{Draining: again.Draining}) {
		t.Errorf("an unchanged state changed the kernel: %+v", again)
	}
	if _, ok := second.virtualServer(t, tcpKey(staleVIP, 80)); ok {
		t.Errorf("stale service's virtual server survived the reconcile")
	}
	time.Sleep(time.Second) // traffic through the new instance's rules
	stop()
	s := <-done
	if s.err != nil {
		t.Fatal(s.err)
	}
	if len(s.res.Failures) > 0 || len(s.res.Counts) != 3 {
		t.Fatalf("traffic across the restart: %v", s.res)
	}
	t.Logf("traffic across the restart: %v", s.res)
}
