package dptest

import (
	"fmt"

	"github.com/switchyard-proxy/switchyard/dataplane"
	"github.com/switchyard-proxy/switchyard/e2e/testbed/netns"
	switchyardv1 "github.com/switchyard-proxy/switchyard/proto/switchyard/v1"
)

// TargetPort is the port the pods' echo servers listen on.
const TargetPort = 8080

// Service is a NodePort service "default/<name>" with one TCP port "http"
// whose endpoints are pods, ready and serving.
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
	for _, p := range pods {
		sv.ClusterEndpoints = append(sv.ClusterEndpoints, &switchyardv1.Endpoint{
			Address: p.IP.String(), Ready: true, Serving: true,
			Ports: []*switchyardv1.EndpointPort{{Name: "http", Port: TargetPort}},
		})
	}
	return sv
}

// State is node's state with svcs, pods in 10.244.0.0/16.
func State(node netns.Node, svcs ...*switchyardv1.ServiceView) *dataplane.State {
	st := &dataplane.State{
		Config: &switchyardv1.NodeConfig{NodeName: node.Name,
			ClusterCidrs: []string{"10.244.0.0/16"}, NodeIps: []string{node.IP.String()}},
		Services: map[string]*switchyardv1.ServiceView{},
	}
	for _, sv := range svcs {
		st.Services[sv.Namespace+"/"+sv.Name] = sv
	}
	return st
}

// BenchService is benchmark service i with 5 endpoints; alt moves its
// last endpoint. Every mode's benchmark uses this shape.
func BenchService(i int, alt bool) *switchyardv1.ServiceView {
	sv := &switchyardv1.ServiceView{
		Namespace: "bench", Name: fmt.Sprintf("s%d", i), Type: switchyardv1.ServiceType_SERVICE_TYPE_CLUSTER_IP,
		ClusterIps:      []string{fmt.Sprintf("10.96.%d.%d", i/250, i%250+1)},
		Ports:           []*switchyardv1.ServicePort{{Name: "http", Protocol: switchyardv1.Protocol_PROTOCOL_TCP, Port: 80}},
		HasAnyEndpoints: true,
	}
	for e := range 5 {
		n := i*5 + e
		addr := fmt.Sprintf("10.%d.%d.%d", 128+n/62500, (n/250)%250, n%250+1)
		if alt && e == 4 {
			addr = "10.127.0.1"
		}
		sv.ClusterEndpoints = append(sv.ClusterEndpoints, &switchyardv1.Endpoint{
			Address: addr, Ready: true, Serving: true,
			Ports: []*switchyardv1.EndpointPort{{Name: "http", Port: TargetPort}},
		})
	}
	return sv
}

// BenchState is n benchmark services on node "bench"; alt moves the last
// endpoint of every one.
func BenchState(n int, alt bool) *dataplane.State {
	st := &dataplane.State{
		Config:   &switchyardv1.NodeConfig{NodeName: "bench", ClusterCidrs: []string{"10.128.0.0/9"}},
		Services: make(map[string]*switchyardv1.ServiceView, n+1),
	}
	for i := range n {
		st.Services[fmt.Sprintf("bench/s%d", i)] = BenchService(i, alt)
	}
	return st
}

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
