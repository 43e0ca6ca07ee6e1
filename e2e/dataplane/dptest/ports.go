package dptest

import (
	"net/netip"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/switchyard-proxy/switchyard/dataplane"
	"github.com/switchyard-proxy/switchyard/e2e/testbed/netns"
	switchyardv1 "github.com/switchyard-proxy/switchyard/proto/switchyard/v1"
)

// MetricsPort is the second port of TwoPortService, which no endpoint
// serves.
const MetricsPort = 9100

// RefuseWithin is how fast a port without endpoints must refuse: a
// reject is answered at once, a drop only times out.
const RefuseWithin = 100 * time.Millisecond

// TwoPortService is Service with a second TCP port "metrics" (MetricsPort,
// node port nodePort+1) that the service's EndpointSlices do not name, as
// a current control plane sends it: http has endpoints (the pods),
// metrics has none anywhere. With perPort false the view is what a
// control plane older than ServicePort.has_any_endpoints sent: only the
// service-wide bit, true.
func TwoPortService(name, vip string, port, nodePort uint32, perPort bool, pods ...netns.Pod) *switchyardv1.ServiceView {
	sv := Service(name, vip, port, nodePort, pods...)
	sv.Ports = append(sv.Ports, &switchyardv1.ServicePort{Name: "metrics", Protocol: switchyardv1.Protocol_PROTOCOL_TCP,
		Port: MetricsPort, NodePort: nodePort + 1})
	if perPort {
		sv.Ports[0].HasAnyEndpoints, sv.Ports[1].HasAnyEndpoints = proto.Bool(len(pods) > 0), proto.Bool(false)
	}
	return sv
}

// CheckPortWithoutEndpoints programs, with apply, a NodePort service on
// vip (node ports 30090, 30091) whose http port has the bed's pods as
// endpoints and whose metrics port has none anywhere (issue 17), and
// checks with real connections, from the node and from the client: every
// address of metrics (cluster IP, node port) is refused within
// RefuseWithin while http answers on the same addresses. The control
// applies the view as an older control plane sent it (one service-wide
// bit): metrics is then dropped, which shows the test tells the two
// apart.
func (b *Bed) CheckPortWithoutEndpoints(t *testing.T, vip netip.Addr, apply func(*testing.T, *dataplane.State)) {
	t.Helper()
	const nodePort = 30090
	client := b.Topo.Client().NS
	http, metrics := netip.AddrPortFrom(vip, 80), netip.AddrPortFrom(vip, MetricsPort)
	httpNP, metricsNP := netip.AddrPortFrom(b.Node.IP, nodePort), netip.AddrPortFrom(b.Node.IP, nodePort+1)

	apply(t, State(b.Node, TwoPortService("multi", vip.String(), 80, nodePort, true, b.Pods...)))
	for _, c := range []struct{ name, ns string }{{"node", b.Node.NS}, {"client", client}} {
		t.Run("from "+c.name, func(t *testing.T) {
			b.CheckRefusedWithin(t, c.ns, metrics, RefuseWithin)
			b.CheckAnswered(t, c.ns, http, 10, "http on the cluster IP")
		})
	}
	t.Run("node port from client", func(t *testing.T) {
		b.CheckRefusedWithin(t, client, metricsNP, RefuseWithin)
		b.CheckAnswered(t, client, httpNP, 10, "http on the node port")
	})
	t.Run("control: older control plane's view drops", func(t *testing.T) {
		apply(t, State(b.Node, TwoPortService("multi", vip.String(), 80, nodePort, false, b.Pods...)))
		b.CheckDropped(t, client, metrics)
		b.CheckAnswered(t, client, http, 10, "http on the cluster IP")
	})
}
