package iptables

import (
	"fmt"
	"os"
	"path/filepath"

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

// caseOptions are the render options of a golden case: sharded, or
// kube-proxy's shape (flat, KUBE-SEP chains, no hairpin set) when the
// case directory holds a file named "flat".
func caseOptions(dir string) RenderOptions {
	if _, err := os.Stat(filepath.Join(dir, "flat")); err == nil {
		return RenderOptions{KubeProxyShape: true}
	}
	return RenderOptions{ShardBits: DefaultShardBits}
}
