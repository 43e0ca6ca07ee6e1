package guest

import (
	"net"
	"net/netip"
	"syscall"
	"testing"

	"github.com/moby/ipvs"
	"github.com/vishvananda/netlink"

	"github.com/switchyard-proxy/switchyard/e2e/testbed/probe"
)

// smokeLink is the dummy link of TestMobyIPVSSmoke.
const smokeLink = "smoke0"

// TestMobyIPVSSmoke proves the guest itself, independent of
// dataplane/ipvs: a virtual server programmed with github.com/moby/ipvs in
// the node namespace, its address on a dummy link, balances real TCP
// connections from the client (PREROUTING path) and from the node itself
// (OUTPUT path) over three pods in exact round robin.
func TestMobyIPVSSmoke(t *testing.T) {
	b := useBed(t)
	vip := netip.MustParseAddrPort("10.96.7.7:80")

	err := b.topo.Do(b.node.NS, func() error {
		if err := netlink.LinkAdd(&netlink.Dummy{LinkAttrs: netlink.LinkAttrs{Name: smokeLink}}); err != nil {
			return err
		}
		l, err := netlink.LinkByName(smokeLink)
		if err != nil {
			return err
		}
		if err := netlink.AddrAdd(l, &netlink.Addr{IPNet: &net.IPNet{IP: vip.Addr().AsSlice(), Mask: net.CIDRMask(32, 32)}}); err != nil {
			return err
		}
		return netlink.LinkSetUp(l)
	})
	if err != nil {
		t.Fatalf("dummy link with the VIP in the node: %v", err)
	}

	h, err := ipvs.New(b.nodeNSPath())
	if err != nil {
		t.Fatalf("ipvs handle in the node: %v", err)
	}
	defer h.Close()
	svc := &ipvs.Service{
		Address: vip.Addr().AsSlice(), Port: vip.Port(), Protocol: syscall.IPPROTO_TCP,
		AddressFamily: syscall.AF_INET, Netmask: 0xffffffff, SchedName: ipvs.RoundRobin,
	}
	if err := h.NewService(svc); err != nil {
		t.Fatalf("NewService: %v", err)
	}
	for _, p := range b.pods {
		d := &ipvs.Destination{Address: p.IP.AsSlice(), Port: backendPort, Weight: 1,
			ConnectionFlags: ipvs.ConnectionFlagMasq, AddressFamily: syscall.AF_INET}
		if err := h.NewDestination(svc, d); err != nil {
			t.Fatalf("NewDestination %s: %v", p.IP, err)
		}
	}
	svcs, err := h.GetServices()
	if err != nil || len(svcs) != 1 || svcs[0].SchedName != ipvs.RoundRobin {
		t.Fatalf("GetServices: %v, %d services (want 1 rr)", err, len(svcs))
	}

	t.Run("client", func(t *testing.T) {
		seq := b.sequence(t, b.topo.Client().NS, vip, 12)
		checkRoundRobin(t, seq, 3)
		t.Logf("rr from the client: %v", seq)
	})
	t.Run("node", func(t *testing.T) {
		seq := b.sequence(t, b.node.NS, vip, 6)
		checkRoundRobin(t, seq, 3)
	})
	t.Run("deleted service refuses", func(t *testing.T) {
		if err := h.DelService(svc); err != nil {
			t.Fatalf("DelService: %v", err)
		}
		res, err := probe.New(b.topo, b.topo.Client().NS).TCP(t.Context(), vip, probe.Options{Timeout: probeTimeout})
		if err != nil {
			t.Fatal(err)
		}
		if len(res.Failures) != 1 || res.Failures[0].Reason != probe.ReasonRefused {
			t.Fatalf("after DelService: %v, want refused (nothing listens on the VIP)", res)
		}
	})
}
