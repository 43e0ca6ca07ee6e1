package dptest

import (
	"net/netip"

	"github.com/switchyard-proxy/switchyard/dataplane"
	"github.com/switchyard-proxy/switchyard/dataplane/dataplanetest"
	"github.com/switchyard-proxy/switchyard/e2e/testbed/netns"
	switchyardv1 "github.com/switchyard-proxy/switchyard/proto/switchyard/v1"
)

// TargetPort is the port the pods' echo servers listen on.
const TargetPort = 8080

// Service is a NodePort service "default/<name>" with one TCP port "http"
// whose endpoints are pods, ready and serving, at their address of vip's
// family.
func Service(name, vip string, port, nodePort uint32, pods ...netns.Pod) *switchyardv1.ServiceView {
	sv := &switchyardv1.ServiceView{
		Namespace: "default", Name: name, Type: switchyardv1.ServiceType_SERVICE_TYPE_NODE_PORT,
		ClusterIps: []string{vip},
		Ports: []*switchyardv1.ServicePort{{Name: "http", Protocol: switchyardv1.Protocol_PROTOCOL_TCP,
			Port: port, NodePort: nodePort}},
		ExternalTrafficPolicy: switchyardv1.TrafficPolicy_TRAFFIC_POLICY_CLUSTER,
		InternalTrafficPolicy: switchyardv1.TrafficPolicy_TRAFFIC_POLICY_CLUSTER,
		HasAnyEndpoints:       len(pods) > 0,
	}
	fam := FamilyOf(netip.MustParseAddr(vip))
	for _, p := range pods {
		sv.ClusterEndpoints = append(sv.ClusterEndpoints, &switchyardv1.Endpoint{
			Address: PodIP(p, fam).String(), Ready: true, Serving: true,
			Ports: []*switchyardv1.EndpointPort{{Name: "http", Port: TargetPort}},
		})
	}
	return sv
}

// State is node's state with svcs, pods in 10.244.0.0/16 and, on a
// dual-stack node, in netns.DefaultClusterCIDR6 too; the node's IPs are
// its address of each family, IPv4 first (its primary).
func State(node netns.Node, svcs ...*switchyardv1.ServiceView) *dataplane.State {
	st := &dataplane.State{
		Config: &switchyardv1.NodeConfig{NodeName: node.Name,
			ClusterCidrs: []string{"10.244.0.0/16"}, NodeIps: []string{node.IP.String()}},
		Services: map[string]*switchyardv1.ServiceView{},
	}
	if node.IP6.IsValid() {
		st.Config.ClusterCidrs = append(st.Config.ClusterCidrs, netns.DefaultClusterCIDR6.String())
		st.Config.NodeIps = append(st.Config.NodeIps, node.IP6.String())
	}
	for _, sv := range svcs {
		st.Services[sv.Namespace+"/"+sv.Name] = sv
	}
	return st
}

// BenchService is benchmark service i with 5 endpoints; alt moves its
// last endpoint. Every mode's benchmark uses this shape
// (dataplanetest.BenchService).
func BenchService(i int, alt bool) *switchyardv1.ServiceView {
	return dataplanetest.BenchService(i, alt)
}

// BenchState is n benchmark services on node "bench"; alt moves the last
// endpoint of every one.
func BenchState(n int, alt bool) *dataplane.State { return dataplanetest.BenchState(n, alt) }

// WithService is a copy of st with sv added or replaced; st is unchanged
// and the other services are shared, as an agent's next view shares them.
func WithService(st *dataplane.State, sv *switchyardv1.ServiceView) *dataplane.State {
	next := &dataplane.State{Config: st.Config, Services: make(map[string]*switchyardv1.ServiceView, len(st.Services)+1)}
	for k, v := range st.Services {
		next.Services[k] = v
	}
	next.Services[sv.Namespace+"/"+sv.Name] = sv
	return next
}

// ruleFormAddrs are the addresses RuleForms gives its services outside
// the service CIDR, per family: documentation ranges, which only rules
// ever see (no check sends traffic to them).
var ruleFormAddrs = map[dataplane.Family]struct{ lb, sourceRange, external string }{
	dataplane.IPv4: {"203.0.113.9", "198.51.100.0/24", "192.0.2.9"},
	dataplane.IPv6: {"2001:db8:1::9", "2001:db8:2::/64", "2001:db8:3::9"},
}

// RuleForms are services over pods in families fams (one cluster IP and
// each pod's address of every family, as the control plane sends a
// dual-stack service), one of each shape the renderers have a rule form
// for: a NodePort service "web" (host 10 of the service CIDRs), ClientIP
// affinity "sticky" (11), a LoadBalancer "lb" (12) with source ranges,
// an external IP, externalTrafficPolicy Local and a health check node
// port, UDP "dns" (13), and "empty" (14) without endpoints. A full
// resync of them must find the kernel's read-back equal to what it
// renders.
func RuleForms(fams []dataplane.Family, pods ...netns.Pod) []*switchyardv1.ServiceView {
	web := serviceIn(fams, "web", 10, 80, 30080, pods...)
	sticky := serviceIn(fams, "sticky", 11, 80, 0, pods...)
	sticky.SessionAffinity = switchyardv1.SessionAffinity_SESSION_AFFINITY_CLIENT_IP
	sticky.SessionAffinityTimeoutSeconds = 60
	lb := serviceIn(fams, "lb", 12, 443, 30443, pods[0])
	lb.Type = switchyardv1.ServiceType_SERVICE_TYPE_LOAD_BALANCER
	for _, f := range fams {
		a := ruleFormAddrs[f]
		lb.LoadBalancerIps = append(lb.LoadBalancerIps, a.lb)
		lb.LoadBalancerSourceRanges = append(lb.LoadBalancerSourceRanges, a.sourceRange)
		lb.ExternalIps = append(lb.ExternalIps, a.external)
	}
	lb.ExternalTrafficPolicy = switchyardv1.TrafficPolicy_TRAFFIC_POLICY_LOCAL
	lb.LocalEndpoints = lb.ClusterEndpoints
	lb.HealthCheckNodePort = 32000
	dns := serviceIn(fams, "dns", 13, 53, 0, pods...)
	dns.Ports[0].Protocol = switchyardv1.Protocol_PROTOCOL_UDP
	return []*switchyardv1.ServiceView{web, sticky, lb, dns, serviceIn(fams, "empty", 14, 80, 30081)}
}

// RuleFormState is the node's state with the RuleForms of every family
// the bed has: IPv4, and IPv6 too on a dual-stack bed.
func (b *Bed) RuleFormState() *dataplane.State {
	fams := []dataplane.Family{dataplane.IPv4}
	if b.DualStack() {
		fams = Families
	}
	return State(b.Node, RuleForms(fams, b.Pods...)...)
}

// serviceIn is Service with a cluster IP, host number host of the
// service CIDR, in each family of fams, and each pod's address of every
// one of them as endpoints.
func serviceIn(fams []dataplane.Family, name string, host byte, port, nodePort uint32, pods ...netns.Pod) *switchyardv1.ServiceView {
	sv := Service(name, ServiceIP(fams[0], host).String(), port, nodePort, pods...)
	for _, f := range fams[1:] {
		other := Service(name, ServiceIP(f, host).String(), port, nodePort, pods...)
		sv.ClusterIps = append(sv.ClusterIps, other.ClusterIps...)
		sv.ClusterEndpoints = append(sv.ClusterEndpoints, other.ClusterEndpoints...)
	}
	return sv
}
