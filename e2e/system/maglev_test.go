package system_test

import (
	"cmp"
	"context"
	"fmt"
	"net/netip"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/switchyard-proxy/switchyard/dataplane/maglev"
	"github.com/switchyard-proxy/switchyard/dataplane/serviceport"
	"github.com/switchyard-proxy/switchyard/e2e/dataplane/dptest"
	"github.com/switchyard-proxy/switchyard/e2e/system"
	"github.com/switchyard-proxy/switchyard/e2e/testbed/netns"
	"github.com/switchyard-proxy/switchyard/e2e/testbed/probe"
	eps "github.com/switchyard-proxy/switchyard/e2e/testbed/slices"
	switchyardv1 "github.com/switchyard-proxy/switchyard/proto/switchyard/v1"
)

// maglevClient is the client address every node's connections of
// testMaglev leave from (bound on each node's loopback; the node
// masquerades them, its source being off-cluster): one client tuple
// through two nodes.
var maglevClient = netip.MustParseAddr("10.200.0.99")

// maglevTuples is how many client ports testMaglev sends from.
const maglevTuples = 40

// testMaglev: a Service annotated switchyard.io/load-balancing: maglev,
// through the whole stack. The control plane puts one table in the view
// it sends every node (the same table for both, as maglev.New computes
// from the endpoints); then, by mode:
//   - nftables: each node's kernel map, read back, is that table, and
//     each client tuple reaches the endpoint the table names, through
//     either node; Explain, given the source port, names that endpoint
//     on both nodes;
//   - ipvs: the virtual server uses the kernel's mh with mh-port, and a
//     tuple reaches the same endpoint through either node;
//   - iptables: refused clearly: Explain says maglev is not available
//     there, and the service balances at random, still reaching every
//     endpoint.
func testMaglev(t *testing.T, e *env) {
	s := e.createService(t, "sc-maglev", corev1.ServiceSpec{ClusterIP: "10.96.1.41",
		Ports: []corev1.ServicePort{{Name: "http", Protocol: corev1.ProtocolTCP, Port: 80}},
	}, eps.TCP("http", system.TargetPort))
	svcObj := s.DeepCopy()
	svcObj.Annotations = map[string]string{serviceport.AnnotationLoadBalancing: "maglev"}
	if _, err := e.c.API.Client().CoreV1().Services(s.Namespace).Update(t.Context(), svcObj, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	pods := e.c.Topo.Pods()
	if err := e.write(t.Context(), s, e.endpoints(pods...)...); err != nil {
		t.Fatal(err)
	}
	tab := e.viewTable(t, s, len(pods))
	podAddr := map[string]string{}
	for _, p := range pods {
		podAddr[p.Name] = netip.AddrPortFrom(p.IP, system.TargetPort).String()
	}
	for _, n := range e.c.Topo.Nodes() {
		if _, err := e.c.Topo.Exec(t.Context(), n.NS, "ip", "addr", "replace", maglevClient.String()+"/32", "dev", "lo"); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			_, _ = e.c.Topo.Exec(context.WithoutCancel(t.Context()), n.NS, "ip", "addr", "del", maglevClient.String()+"/32", "dev", "lo")
		})
		e.checkMaglevKernel(t, n, s, tab)
	}
	reached := map[string]int{}
	for i := range maglevTuples {
		src := netip.AddrPortFrom(maglevClient, uint16(42000+i))
		var first string
		for _, n := range e.c.Topo.Nodes() {
			res, err := probe.New(e.c.Topo, n.NS).TCP(t.Context(), s.vip(0), probe.Options{Source: src, Timeout: 2 * time.Second})
			if err != nil || len(res.Failures) > 0 || len(res.Counts) != 1 {
				t.Fatalf("%s from %s: %v %v", n.Name, src, res, err)
			}
			var got string
			for name := range res.Counts {
				got = podAddr[name]
			}
			reached[got]++
			switch e.dataplaneMode() {
			case modeNFTables:
				if want := tab.Lookup(maglev.FlowKey(src.Addr(), src.Port()), maglev.Seed); got != want {
					t.Errorf("%s from %s reached %s, the control plane's table names %s", n.Name, src, got, want)
				}
				e.checkMaglevExplain(t, n, s, src, got)
			case modeIPVS:
				if first != "" && got != first {
					t.Errorf("%s from %s reached %s, node-0 sent it to %s: IPVS mh differs between nodes", n.Name, src, got, first)
				}
			}
			first = cmp.Or(first, got)
		}
	}
	if len(reached) != len(pods) {
		t.Errorf("%d client tuples through %d nodes reached %d of %d endpoints: %v", maglevTuples, len(e.c.Topo.Nodes()), len(reached), len(pods), reached)
	}
	t.Logf("%s mode: %d client tuples through %d nodes: %v", e.dataplaneMode(), maglevTuples, len(e.c.Topo.Nodes()), reached)
}

// viewTable waits until every node's view of s carries a maglev table
// for all n endpoints, checks that both nodes got the same one, and
// returns it.
func (e *env) viewTable(t *testing.T, s *svc, n int) maglev.Table {
	t.Helper()
	name := s.Namespace + "/" + s.Name
	var tabs []*switchyardv1.MaglevTable
	waitFor(t.Context(), t, "every node's view carries the maglev table", func() (bool, string) {
		tabs = tabs[:0]
		for _, node := range e.c.NodeNames() {
			v, err := e.c.NodeViewAt(t.Context(), e.replica, node)
			if err != nil {
				return false, err.Error()
			}
			var sv *switchyardv1.ServiceView
			for _, r := range v.GetResources() {
				if r.GetName() == name {
					sv = r.GetService()
				}
			}
			if sv.GetLoadBalancing() != switchyardv1.LoadBalancing_LOAD_BALANCING_MAGLEV || len(sv.GetMaglevTables()) != 1 ||
				len(sv.GetMaglevTables()[0].GetEndpoints()) != n {
				return false, fmt.Sprintf("%s: %v with tables %v", node, sv.GetLoadBalancing(), sv.GetMaglevTables())
			}
			tabs = append(tabs, sv.GetMaglevTables()[0])
		}
		return true, ""
	})
	for i, mt := range tabs[1:] {
		if !sameTable(tabs[0], mt) {
			t.Fatalf("node %d's view has another table than node 0's", i+1)
		}
	}
	e.settled(t, "maglev")
	mt := tabs[0]
	tab := maglev.Table{Backends: mt.GetEndpoints()}
	for _, s := range mt.GetSlots() {
		tab.Slots = append(tab.Slots, uint16(s))
	}
	if want, err := maglev.New(tab.Backends, maglev.Size(n)); err != nil || !sameSlots(want.Slots, tab.Slots) || mt.GetSeed() != maglev.Seed {
		t.Fatalf("the view's table (%d slots, seed %#x) is not maglev.New's of its endpoints (%v)", len(tab.Slots), mt.GetSeed(), err)
	}
	return tab
}

func sameTable(a, b *switchyardv1.MaglevTable) bool {
	return a.GetSeed() == b.GetSeed() && strings.Join(a.GetEndpoints(), ",") == strings.Join(b.GetEndpoints(), ",") &&
		fmt.Sprint(a.GetSlots()) == fmt.Sprint(b.GetSlots())
}

func sameSlots(a, b []uint16) bool { return fmt.Sprint(a) == fmt.Sprint(b) }

// checkMaglevKernel checks what node n's kernel holds for s in e's mode.
func (e *env) checkMaglevKernel(t *testing.T, n netns.Node, s *svc, tab maglev.Table) {
	t.Helper()
	exec := func(ctx context.Context, argv ...string) ([]byte, error) { return e.c.Topo.Exec(ctx, n.NS, argv...) }
	switch e.dataplaneMode() {
	case modeNFTables:
		km, err := dptest.ReadKernelMaglev(t.Context(), exec, s.Namespace+"/"+s.Name+"/tcp/http")
		if err != nil {
			t.Fatalf("%s: %v", n.Name, err)
		}
		if km.Seed != maglev.Seed || len(km.Slots) != len(tab.Slots) {
			t.Fatalf("%s: the kernel hashes mod %d seed %#x; the view's table has %d slots", n.Name, len(km.Slots), km.Seed, len(tab.Slots))
		}
		for i, got := range km.Slots {
			if want := tab.Backend(uint32(i)); got != want {
				t.Fatalf("%s: kernel slot %d is %q, the control plane's table says %s", n.Name, i, got, want)
			}
		}
		t.Logf("%s: the kernel's %d slots (%s) are the control plane's table", n.Name, len(km.Slots), km.Map)
	case modeIPVS:
		out, err := exec(t.Context(), "ipvsadm", "-Ln", "-t", s.vip(0).String())
		if err != nil || !strings.Contains(string(out), "mh") || !strings.Contains(string(out), "mh-port") {
			t.Fatalf("%s: virtual server %s is not mh with mh-port: %v\n%s", n.Name, s.vip(0), err, out)
		}
	default:
		ex, err := e.c.ExplainAt(t.Context(), e.replica, &switchyardv1.ExplainRequest{NodeName: n.Name,
			SourceIp: maglevClient.String(), DestinationIp: s.Spec.ClusterIP, DestinationPort: 80})
		if err != nil || !strings.Contains(strings.Join(ex.GetNotes(), "; "), "maglev is not available in the iptables mode") {
			t.Fatalf("%s: Explain does not say the iptables mode refuses maglev: %v %v", n.Name, ex.GetNotes(), err)
		}
	}
}

// checkMaglevExplain checks that Explain, given the client's port, names
// the one endpoint the connection reached.
func (e *env) checkMaglevExplain(t *testing.T, n netns.Node, s *svc, src netip.AddrPort, reached string) {
	t.Helper()
	ex, err := e.c.ExplainAt(t.Context(), e.replica, &switchyardv1.ExplainRequest{NodeName: n.Name,
		SourceIp: src.Addr().String(), SourcePort: uint32(src.Port()), DestinationIp: s.Spec.ClusterIP, DestinationPort: 80,
		Mode: switchyardv1.DataplaneMode_DATAPLANE_MODE_NFTABLES})
	if err != nil {
		t.Fatal(err)
	}
	shares := ex.GetEndpoints()
	if len(shares) != 1 || netip.AddrPortFrom(netip.MustParseAddr(shares[0].GetAddress()), uint16(shares[0].GetPort())).String() != reached {
		t.Errorf("%s: Explain %s names %v, the connection reached %s (%s)", n.Name, src, shares, reached, ex.GetSummary())
	}
}
