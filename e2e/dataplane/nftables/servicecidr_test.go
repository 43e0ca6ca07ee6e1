package nftables

import (
	"net/netip"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/switchyard-proxy/switchyard/e2e/dataplane/dptest"
	"github.com/switchyard-proxy/switchyard/e2e/testbed/echo"
	"github.com/switchyard-proxy/switchyard/e2e/testbed/probe"
	switchyardv1 "github.com/switchyard-proxy/switchyard/proto/switchyard/v1"
)

// TestServiceCIDRs (issue 17): with the cluster's service ranges in its
// NodeConfig, the nftables mode does what kube-proxy's cluster-ips-check
// does. A real cluster IP serves; the same cluster IP on a port its
// service does not serve is refused at once (rejected); an address of
// the ranges that no service has is dropped, as upstream drops it (a
// Service whose rules are not programmed yet then looks like a lost SYN,
// which clients retry). The control shows what the drop prevents: without
// the ranges that address follows the node's route for the service range
// and reaches whatever answers on the segment, here a stand-in in the
// control namespace that owns it.
func TestServiceCIDRs(t *testing.T) {
	b := newBed(t)
	unallocated := netip.MustParseAddrPort("10.96.5.5:80")
	unserved := netip.AddrPortFrom(vip.Addr(), 81)
	ctl := b.Topo.Control().NS
	if _, err := b.Topo.Exec(t.Context(), ctl, "ip", "addr", "add", unallocated.Addr().String()+"/32", "dev", "eth0"); err != nil {
		t.Fatal(err)
	}
	if _, err := (echo.Launcher{Topo: b.Topo}).Start(t.Context(), ctl, echo.Config{Name: "stray", TCP: unallocated.String()}); err != nil {
		t.Fatal(err)
	}
	st := dptest.State(b.Node, dptest.Service("web", vip.Addr().String(), 80, 0, b.Pods...))
	st.Services["default/web"].Type = switchyardv1.ServiceType_SERVICE_TYPE_CLUSTER_IP
	from := []struct{ name, ns string }{{"node (output hook)", b.Node.NS}, {"client (forward hook)", b.Topo.Client().NS}}

	b.apply(t, st)
	for _, f := range from {
		t.Run("control: without service ranges, from "+f.name, func(t *testing.T) {
			res, err := probe.New(b.Topo, f.ns).TCP(t.Context(), unallocated, probe.Options{Count: 5})
			if err != nil || res.Counts["stray"] != 5 {
				t.Fatalf("want the unallocated address to reach the stand-in 5 times, got %v (%v)", res, err)
			}
		})
	}

	withRanges := *st
	withRanges.Config = proto.Clone(st.Config).(*switchyardv1.NodeConfig)
	withRanges.Config.ServiceCidrs = []string{"10.96.0.0/16"}
	b.apply(t, &withRanges)
	for _, f := range from {
		t.Run("from "+f.name, func(t *testing.T) {
			b.CheckAnswered(t, f.ns, vip, 10, "the cluster IP")
			b.CheckRefusedWithin(t, f.ns, unserved, dptest.RefuseWithin)
			b.CheckDropped(t, f.ns, unallocated)
		})
	}
}
