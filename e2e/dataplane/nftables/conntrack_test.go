package nftables

import (
	"github.com/switchyard-proxy/switchyard/e2e/dataplane/dptest"
	"net"
	"strings"
	"testing"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/switchyard-proxy/switchyard/dataplane/conntrack"
	"github.com/switchyard-proxy/switchyard/dataplane/nftables"
	"github.com/switchyard-proxy/switchyard/e2e/testbed/netns"
	switchyardv1 "github.com/switchyard-proxy/switchyard/proto/switchyard/v1"
)

func TestRemovedUDPEndpointLosesEstablishedFlow(t *testing.T) {
	t.Run("with conntrack cleanup", func(t *testing.T) { udpFlowAfterRemoval(t, true) })
	// The control: without cleanup the kernel keeps the stale DNAT, which
	// shows the test can see the difference.
	t.Run("control without cleanup", func(t *testing.T) { udpFlowAfterRemoval(t, false) })
}

func udpFlowAfterRemoval(t *testing.T, cleanup bool) {
	b := newBed(t)
	var h *netlink.Handle
	if err := b.topo.Do(b.node.NS, func() error {
		var err error
		h, err = netlink.NewHandle(unix.NETLINK_NETFILTER)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(h.Close)
	var cfg nftables.Config
	if cleanup {
		cfg.Conntrack = conntrack.Netlink{Handle: h}
	}
	b.dp = b.newDP(t, cfg)
	svc := func(pods ...netns.Pod) *switchyardv1.ServiceView {
		sv := dptest.Service("dns", vip.Addr().String(), 80, 0, pods...)
		sv.Type = switchyardv1.ServiceType_SERVICE_TYPE_CLUSTER_IP
		sv.Ports[0].Protocol = switchyardv1.Protocol_PROTOCOL_UDP
		return sv
	}
	b.apply(t, dptest.State(b.node, svc(b.pods...)))

	var conn *net.UDPConn
	if err := b.topo.Do(b.topo.Client().NS, func() error {
		var err error
		conn, err = net.DialUDP("udp", nil, net.UDPAddrFromAddrPort(vip))
		return err
	}); err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	first := dptest.Exchange(t, conn)
	for range 5 {
		if got := dptest.Exchange(t, conn); got != first {
			t.Fatalf("one UDP flow reached %s then %s", first, got)
		}
	}
	var rest []netns.Pod
	for _, p := range b.pods {
		if !strings.EqualFold(p.Name, first) {
			rest = append(rest, p)
		}
	}
	if len(rest) != 2 {
		t.Fatalf("backend %q is not one of the pods", first)
	}
	b.apply(t, dptest.State(b.node, svc(rest...)))
	got := dptest.Exchange(t, conn)
	switch {
	case cleanup && got == first:
		t.Fatalf("flow still reaches removed endpoint %s: conntrack entry not cleared", first)
	case !cleanup && got != first:
		t.Fatalf("without cleanup the flow moved from %s to %s: the test cannot tell", first, got)
	}
}
