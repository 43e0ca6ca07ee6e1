package guest

import (
	"net/netip"
	"strings"
	"testing"

	"github.com/switchyard-proxy/switchyard/dataplane"
	"github.com/switchyard-proxy/switchyard/dataplane/ipvs"
	"github.com/switchyard-proxy/switchyard/e2e/testbed/netns"
	switchyardv1 "github.com/switchyard-proxy/switchyard/proto/switchyard/v1"
)

// clusterCIDR is the topology's default cluster CIDR (pods).
const clusterCIDR = "10.244.0.0/16"

// agent is one Dataplane instance on the node, with its kernel seam, as
// one run of a node agent would hold them.
type agent struct {
	k  *ipvs.NetlinkKernel
	dp *ipvs.Dataplane
}

// newAgent opens the node's kernel and builds a Dataplane for IPv4; mut
// adjusts the config. The kernel handles close when the test ends.
func (b *bed) newAgent(t testing.TB, mut func(*ipvs.Config)) *agent {
	t.Helper()
	k, err := ipvs.NewKernel(ipvs.KernelConfig{NetnsPath: b.nodeNSPath()})
	if err != nil {
		t.Fatalf("ipvs.NewKernel in the node: %v", err)
	}
	t.Cleanup(k.Close)
	cfg := k.Config(ipvs.Config{
		Runner:   b.runner(),
		Families: []dataplane.Family{dataplane.IPv4},
		Logger:   netns.TestLogger(t),
	})
	if mut != nil {
		mut(&cfg)
	}
	dp, err := ipvs.New(cfg)
	if err != nil {
		t.Fatalf("ipvs.New: %v", err)
	}
	return &agent{k: k, dp: dp}
}

// restarted is a new Dataplane on the same kernel handles, logging
// nowhere: what a restarted agent holds, for benchmarks, whose
// sub-benchmarks end before the handles may close
// (TestRestartReconcilesWithoutDrop opens new handles).
func (a *agent) restarted(t testing.TB, b *bed) *agent {
	t.Helper()
	dp, err := ipvs.New(a.k.Config(ipvs.Config{
		Runner:   b.runner(),
		Families: []dataplane.Family{dataplane.IPv4},
	}))
	if err != nil {
		t.Fatalf("ipvs.New: %v", err)
	}
	return &agent{k: a.k, dp: dp}
}

func (a *agent) apply(t testing.TB, st *dataplane.State, full bool) dataplane.SyncStats {
	t.Helper()
	if err := a.dp.Apply(t.Context(), st, dataplane.ApplyOptions{Full: full}); err != nil {
		t.Fatalf("Apply: %v", err)
	}
	return a.dp.LastSync()
}

// svc is a TCP service on vip:80 (and nodePort when not 0) whose endpoints
// are pods' echo servers.
func svc(name string, vip netip.Addr, nodePort uint32, pods ...netns.Pod) *switchyardv1.ServiceView {
	typ := switchyardv1.ServiceType_SERVICE_TYPE_CLUSTER_IP
	if nodePort != 0 {
		typ = switchyardv1.ServiceType_SERVICE_TYPE_NODE_PORT
	}
	sv := &switchyardv1.ServiceView{
		Namespace: "default", Name: name, Type: typ,
		ClusterIps: []string{vip.String()},
		Ports: []*switchyardv1.ServicePort{{Name: "tcp", Protocol: switchyardv1.Protocol_PROTOCOL_TCP,
			Port: 80, NodePort: nodePort}},
		ExternalTrafficPolicy: switchyardv1.TrafficPolicy_TRAFFIC_POLICY_CLUSTER,
		InternalTrafficPolicy: switchyardv1.TrafficPolicy_TRAFFIC_POLICY_CLUSTER,
		HasAnyEndpoints:       len(pods) > 0,
	}
	for _, p := range pods {
		sv.ClusterEndpoints = append(sv.ClusterEndpoints, &switchyardv1.Endpoint{
			Address: p.IP.String(), Ready: true, Serving: true, IsLocal: true, NodeName: "node-0",
			Ports: []*switchyardv1.EndpointPort{{Name: "tcp", Port: backendPort}, {Name: "udp", Port: backendPort}},
		})
	}
	sv.LocalEndpoints = sv.ClusterEndpoints
	return sv
}

// withUDP adds UDP port 80 to sv.
func withUDP(sv *switchyardv1.ServiceView) *switchyardv1.ServiceView {
	sv.Ports = append(sv.Ports, &switchyardv1.ServicePort{Name: "udp", Protocol: switchyardv1.Protocol_PROTOCOL_UDP, Port: 80})
	return sv
}

// state is the node's state with scheduler sched ("" for the default).
func (b *bed) state(sched string, svcs ...*switchyardv1.ServiceView) *dataplane.State {
	st := &dataplane.State{
		Config: &switchyardv1.NodeConfig{NodeName: b.node.Name, IpvsScheduler: sched,
			ClusterCidrs: []string{clusterCIDR}, NodeIps: []string{b.node.IP.String()}},
		Services: map[string]*switchyardv1.ServiceView{},
	}
	for _, sv := range svcs {
		st.Services[sv.Namespace+"/"+sv.Name] = sv
	}
	return st
}

// virtualServer returns the kernel's virtual server k, if any.
func (a *agent) virtualServer(t testing.TB, k ipvs.VSKey) (ipvs.VirtualServer, bool) {
	t.Helper()
	vss, err := a.k.VirtualServers(t.Context())
	if err != nil {
		t.Fatalf("list virtual servers: %v", err)
	}
	for _, vs := range vss {
		if vs.Key == k {
			return vs, true
		}
	}
	return ipvs.VirtualServer{}, false
}

// realServers returns the kernel's real servers of k by address.
func (a *agent) realServers(t testing.TB, k ipvs.VSKey) map[netip.AddrPort]ipvs.RealServer {
	t.Helper()
	rss, err := a.k.RealServers(t.Context(), k)
	if err != nil {
		t.Fatalf("real servers of %s: %v", k, err)
	}
	out := map[netip.AddrPort]ipvs.RealServer{}
	for _, rs := range rss {
		out[rs.Addr] = rs
	}
	return out
}

// exec runs argv in the node and returns its output.
func (b *bed) exec(t testing.TB, argv ...string) string {
	t.Helper()
	out, err := b.topo.Exec(t.Context(), b.node.NS, argv...)
	if err != nil {
		t.Fatalf("%s in the node: %v", strings.Join(argv, " "), err)
	}
	return string(out)
}

// ourLines returns the lines of `ipset save` or `iptables-save` output that
// mention this mode's sets or chains (prefix SWYD-IPVS) and contain every
// one of words.
func ourLines(out string, words ...string) []string {
	var hits []string
	for _, l := range strings.Split(out, "\n") {
		if !strings.Contains(l, "SWYD-IPVS") {
			continue
		}
		all := true
		for _, w := range words {
			all = all && strings.Contains(l, w)
		}
		if all {
			hits = append(hits, l)
		}
	}
	return hits
}

func tcpKey(a netip.Addr, port uint16) ipvs.VSKey {
	return ipvs.VSKey{Addr: a, Port: port, Protocol: dataplane.TCP}
}
