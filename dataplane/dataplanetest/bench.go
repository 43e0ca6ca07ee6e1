package dataplanetest

import (
	"fmt"

	"github.com/switchyard-proxy/switchyard/dataplane"
	switchyardv1 "github.com/switchyard-proxy/switchyard/proto/switchyard/v1"
)

// BenchTargetPort is the port benchmark endpoints listen on.
const BenchTargetPort = 8080

// BenchService is benchmark service i, "bench/s<i>": one TCP port, 5
// ready endpoints in 10.128.0.0/9; alt moves its last endpoint to
// 10.127.0.1. Every benchmark of every mode, in unit tests and in
// e2e/dataplane, uses this shape, so their numbers compare.
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
			Ports: []*switchyardv1.EndpointPort{{Name: "http", Port: BenchTargetPort}},
		})
	}
	return sv
}

// BenchConfig is the NodeConfig of benchmark states: node "bench", pods
// in 10.128.0.0/9.
func BenchConfig() *switchyardv1.NodeConfig {
	return &switchyardv1.NodeConfig{NodeName: "bench", ClusterCidrs: []string{"10.128.0.0/9"}}
}

// BenchState is n benchmark services on node "bench"; alt moves the last
// endpoint of every one.
func BenchState(n int, alt bool) *dataplane.State {
	st := &dataplane.State{Config: BenchConfig(), Services: make(map[string]*switchyardv1.ServiceView, n+1)}
	for i := range n {
		st.Services[fmt.Sprintf("bench/s%d", i)] = BenchService(i, alt)
	}
	return st
}
