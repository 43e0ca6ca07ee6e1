package guest

import (
	"net/netip"
	"slices"
	"testing"

	"github.com/switchyard-proxy/switchyard/dataplane/ipvs"
	"github.com/switchyard-proxy/switchyard/e2e/testbed/probe"
	switchyardv1 "github.com/switchyard-proxy/switchyard/proto/switchyard/v1"
)

var webVIP = netip.MustParseAddr("10.96.0.10")

// TestClusterIPRoundRobin: a cluster IP over three pods with rr is one
// virtual server with three real servers, its address on kube-ipvs0, and
// new connections rotate over the pods exactly, from the client (routed
// through the node) and from the node itself; UDP too.
func TestClusterIPRoundRobin(t *testing.T) {
	b := useBed(t)
	a := b.newAgent(t, nil)
	a.apply(t, b.state("rr", withUDP(svc("web", webVIP, 0, b.pods...))), false)

	vs, ok := a.virtualServer(t, tcpKey(webVIP, 80))
	if !ok || vs.Scheduler != "rr" {
		t.Fatalf("virtual server %s: present=%v scheduler=%q, want rr", tcpKey(webVIP, 80), ok, vs.Scheduler)
	}
	if rss := a.realServers(t, vs.Key); len(rss) != 3 {
		t.Fatalf("real servers: %v, want the 3 pods", rss)
	}
	if addrs := b.nodeLinkAddrs(t, ipvs.DummyInterface); !slices.Contains(addrs, webVIP) {
		t.Fatalf("%s has %v, want %s", ipvs.DummyInterface, addrs, webVIP)
	}
	addr := netip.AddrPortFrom(webVIP, 80)
	t.Run("client TCP", func(t *testing.T) {
		seq := b.sequence(t, b.topo.Client().NS, addr, 12)
		checkRoundRobin(t, seq, 3)
		t.Logf("rr: %v", seq)
	})
	t.Run("node TCP", func(t *testing.T) {
		checkRoundRobin(t, b.sequence(t, b.node.NS, addr, 6), 3)
	})
	t.Run("client UDP", func(t *testing.T) {
		// A new socket per attempt: a new IPVS connection each time.
		res, err := probe.New(b.topo, b.topo.Client().NS).UDP(t.Context(), addr,
			probe.Options{Count: 30, Timeout: probeTimeout})
		if err != nil {
			t.Fatal(err)
		}
		if len(res.Failures) > 0 || len(res.Counts) != 3 {
			t.Fatalf("UDP: %v, want 10 on each of 3 pods", res)
		}
		for name, c := range res.Counts {
			if c != 10 {
				t.Errorf("UDP: %s answered %d of 30, want 10 (rr): %v", name, c, res)
			}
		}
	})
}

// TestWeightedRoundRobin: NodeConfig.ipvs_scheduler wrr gives wrr virtual
// servers. Endpoints all carry weight 1, so it rotates like rr; weights set
// through the kernel seam (3:1:1) are honoured exactly, and a full resync
// puts them back to the weights the state says.
func TestWeightedRoundRobin(t *testing.T) {
	b := useBed(t)
	a := b.newAgent(t, nil)
	st := b.state("wrr", svc("web", webVIP, 0, b.pods...))
	a.apply(t, st, false)
	key := tcpKey(webVIP, 80)
	if vs, ok := a.virtualServer(t, key); !ok || vs.Scheduler != "wrr" {
		t.Fatalf("virtual server %s: present=%v scheduler=%q, want wrr", key, ok, vs.Scheduler)
	}
	addr := netip.AddrPortFrom(webVIP, 80)
	client := b.topo.Client().NS
	checkRoundRobin(t, b.sequence(t, client, addr, 9), 3)

	heavy := b.pods[0]
	if err := a.k.UpdateRealServer(t.Context(), key, ipvs.RealServer{Addr: backend(heavy), Weight: 3}); err != nil {
		t.Fatalf("set weight 3 on %s: %v", heavy.Name, err)
	}
	// Any 15 consecutive connections are three whole 5-connection cycles.
	got := counts(b.sequence(t, client, addr, 15))
	want := map[string]int{b.pods[0].Name: 9, b.pods[1].Name: 3, b.pods[2].Name: 3}
	for name, n := range want {
		if got[name] != n {
			t.Fatalf("wrr 3:1:1 over 15 connections: %v, want %v", got, want)
		}
	}
	t.Logf("wrr 3:1:1: %v", got)

	stats := a.apply(t, st, true)
	if stats.RealServersUpdated != 1 {
		t.Errorf("full resync updated %d real servers, want 1 (the weight-3 one): %+v", stats.RealServersUpdated, stats)
	}
	for ap, rs := range a.realServers(t, key) {
		if rs.Weight != 1 {
			t.Errorf("after the resync %s has weight %d, want 1", ap, rs.Weight)
		}
	}
	checkRoundRobin(t, b.sequence(t, client, addr, 6), 3)
}

// TestNodePort: a NodePort service answers on the node's IP from the
// client, rotating over the pods, and the pods see the node's address
// (masquerade by the mode's iptables rules and ipsets), not the client's.
func TestNodePort(t *testing.T) {
	b := useBed(t)
	a := b.newAgent(t, nil)
	a.apply(t, b.state("rr", svc("web", webVIP, 30080, b.pods...)), false)
	if _, ok := a.virtualServer(t, tcpKey(b.node.IP, 30080)); !ok {
		t.Fatalf("no virtual server on the node IP %s:30080", b.node.IP)
	}
	np := netip.AddrPortFrom(b.node.IP, 30080)
	client := b.topo.Client().NS
	checkRoundRobin(t, b.sequence(t, client, np, 9), 3)

	res, err := probe.New(b.topo, client).TCP(t.Context(), np, probe.Options{Count: 6, Timeout: probeTimeout})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Failures) > 0 {
		t.Fatalf("node port: %v", res)
	}
	if n := res.Clients[b.topo.Client().IP.String()]; n > 0 {
		t.Errorf("%d replies saw the client's own address: not masqueraded (%v)", n, res.Clients)
	}
	t.Logf("sources seen by the pods: %v", res.Clients)
}

// TestAffinityPinsClient: ClientIP affinity is a persistent virtual server
// with the service's timeout; every connection of one client reaches the
// same pod.
func TestAffinityPinsClient(t *testing.T) {
	b := useBed(t)
	a := b.newAgent(t, nil)
	sv := svc("sticky", webVIP, 0, b.pods...)
	sv.SessionAffinity = switchyardv1.SessionAffinity_SESSION_AFFINITY_CLIENT_IP
	sv.SessionAffinityTimeoutSeconds = 600
	a.apply(t, b.state("rr", sv), false)
	if vs, ok := a.virtualServer(t, tcpKey(webVIP, 80)); !ok || vs.Timeout != 600 {
		t.Fatalf("virtual server: present=%v persistence timeout %d, want 600", ok, vs.Timeout)
	}
	seq := b.sequence(t, b.topo.Client().NS, netip.AddrPortFrom(webVIP, 80), 20)
	if c := counts(seq); len(c) != 1 || c[seq[0]] != 20 || seq[0][0] == '!' {
		t.Fatalf("want all 20 connections on one pod, got %v", c)
	}
	t.Logf("pinned to %s", seq[0])
}
