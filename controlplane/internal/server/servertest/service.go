package servertest

import (
	"github.com/switchyard-proxy/switchyard/controlplane/internal/cache/cachetest"
	switchyardv1 "github.com/switchyard-proxy/switchyard/proto/switchyard/v1"
)

// ServedService is cachetest.Service with its port named "http" and one
// ready, serving cluster-wide endpoint on port 8080 at each of endpoints:
// a service the admin RPCs (Explain's shares, GetNodeView's counts) have
// something to say about.
func ServedService(namespace, name, clusterIP string, port uint32, endpoints ...string) *switchyardv1.Resource {
	r := cachetest.Service(namespace, name, clusterIP, port)
	sv := r.GetService()
	sv.Ports[0].Name = "http"
	for _, ip := range endpoints {
		sv.ClusterEndpoints = append(sv.ClusterEndpoints, &switchyardv1.Endpoint{
			Address: ip, Ports: []*switchyardv1.EndpointPort{{Name: "http", Port: 8080}}, Ready: true, Serving: true})
	}
	sv.HasAnyEndpoints = len(endpoints) > 0
	return r
}
