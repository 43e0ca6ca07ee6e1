package iptables

import (
	"fmt"

	switchyardv1 "github.com/switchyard-proxy/switchyard/proto/switchyard/v1"
)

// benchService is service i with eps endpoints, addresses spread over
// 10.96.0.0/16 and 10.244.0.0/16.
func benchService(i, eps int) *switchyardv1.ServiceView {
	sv := &switchyardv1.ServiceView{
		Namespace: "ns", Name: fmt.Sprintf("s%d", i),
		Type:       switchyardv1.ServiceType_SERVICE_TYPE_CLUSTER_IP,
		ClusterIps: []string{fmt.Sprintf("10.96.%d.%d", (i/250)%256, i%250+1)},
		Ports: []*switchyardv1.ServicePort{{
			Name: "http", Protocol: switchyardv1.Protocol_PROTOCOL_TCP, Port: 80,
		}},
		HasAnyEndpoints: eps > 0,
	}
	for e := range eps {
		n := i*eps + e
		sv.ClusterEndpoints = append(sv.ClusterEndpoints, &switchyardv1.Endpoint{
			Address: fmt.Sprintf("10.244.%d.%d", (n/250)%256, n%250+1),
			Ports:   []*switchyardv1.EndpointPort{{Name: "http", Port: 8080}},
			Ready:   true, Serving: true,
		})
	}
	return sv
}

// goldenOptions are the render options of the golden cases.
var goldenOptions = RenderOptions{ShardBits: DefaultShardBits}
