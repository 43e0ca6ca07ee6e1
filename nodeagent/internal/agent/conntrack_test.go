package agent

import (
	"net/netip"
	"testing"
	"time"

	"github.com/switchyard-proxy/switchyard/dataplane"
	"github.com/switchyard-proxy/switchyard/dataplane/conntrack"
	"github.com/switchyard-proxy/switchyard/dataplane/conntrack/conntracktest"
	"github.com/switchyard-proxy/switchyard/nodeagent/internal/discovery/cptest"
	"github.com/switchyard-proxy/switchyard/nodeagent/internal/runtest"
	switchyardv1 "github.com/switchyard-proxy/switchyard/proto/switchyard/v1"
)

// udpSvc is ns/dns at 10.96.0.10:53/UDP served by eps on 5353.
func udpSvc(version string, eps ...string) *switchyardv1.Resource {
	sv := &switchyardv1.ServiceView{Namespace: "ns", Name: "dns", ClusterIps: []string{"10.96.0.10"},
		Ports: []*switchyardv1.ServicePort{{Name: "dns", Protocol: switchyardv1.Protocol_PROTOCOL_UDP, Port: 53}}}
	for _, a := range eps {
		sv.ClusterEndpoints = append(sv.ClusterEndpoints, &switchyardv1.Endpoint{Address: a, Ready: true, Serving: true,
			Ports: []*switchyardv1.EndpointPort{{Name: "dns", Port: 5353}}})
	}
	return &switchyardv1.Resource{Name: "ns/dns", Version: version, Body: &switchyardv1.Resource_Service{Service: sv}}
}

func flowTo(reply string) conntrack.Entry {
	return conntrack.Entry{Src: netip.MustParseAddrPort("10.0.0.9:40000"), Dst: netip.MustParseAddrPort("10.96.0.10:53"),
		Reply: netip.MustParseAddrPort(reply)}
}

// TestConntrackReconciledAfterSyncs: the agent reconciles after its first
// sync and after a sync that removed an endpoint, with no interval
// elapsing (an hour), against what it applied; a sync that only adds
// runs nothing.
func TestConntrackReconciledAfterSyncs(t *testing.T) {
	cp := cptest.New(t)
	tab := conntracktest.New()
	// Cached before the agent programmed anything: not DNATed.
	tab.Add(dataplane.IPv4, flowTo("10.96.0.10:53"))
	startNode(t, nodeOpts{addrs: []string{cp.Addr()}, stateDir: t.TempDir(), options: func(o *Options) {
		fake := o.NewDataplane
		o.Mode = switchyardv1.DataplaneMode_DATAPLANE_MODE_IPTABLES
		o.NewDataplane = func(switchyardv1.DataplaneMode) (dataplane.Dataplane, error) {
			return fake(switchyardv1.DataplaneMode_DATAPLANE_MODE_DRY_RUN)
		}
		o.Conntrack, o.ConntrackReconcileInterval = tab, time.Hour
	}})
	cp.Next()
	push(cp, "s1", "n1", nil, udpSvc("1", "10.244.0.1", "10.244.0.2"))
	expectAck(t, cp, "n1", "s1")
	runtest.Eventually(t, "the first sync's reconcile deletes the un-NATed entry", func() bool { return tab.Dump() == "" })

	tab.Add(dataplane.IPv4, flowTo("10.244.0.1:5353"), flowTo("10.244.0.2:5353"))
	lists := tab.Listed
	before := lists()
	push(cp, "s2", "n2", nil, udpSvc("2", "10.244.0.1", "10.244.0.2", "10.244.0.3"))
	expectAck(t, cp, "n2", "s2")
	push(cp, "s3", "n3", nil, udpSvc("3", "10.244.0.1", "10.244.0.3"))
	expectAck(t, cp, "n3", "s3")
	runtest.Eventually(t, "the removal's reconcile deletes the flow to the removed endpoint", func() bool {
		return tab.Dump() == "IPv4 10.0.0.9:40000 -> 10.96.0.10:53 via 10.244.0.1:5353"
	})
	runtest.Eventually(t, "the run lists both families", func() bool { return lists()-before >= 2 })
	if n := lists() - before; n != 2 {
		t.Errorf("%d listings after an addition and a removal, want 2 (one run, both families)", n)
	}
}
