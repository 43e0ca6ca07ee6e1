package serviceport_test

import (
	"fmt"
	"maps"
	"slices"
	"testing"

	"github.com/switchyard-proxy/switchyard/dataplane"
	"github.com/switchyard-proxy/switchyard/dataplane/dataplanetest"
	"github.com/switchyard-proxy/switchyard/dataplane/serviceport"
	switchyardv1 "github.com/switchyard-proxy/switchyard/proto/switchyard/v1"
)

// BenchmarkRead reads views as every mode does on a full render: each
// view once per family. "bench" is the shared benchmark shape (one
// port, five endpoints) at 1,000 services; "multiport" is one service
// whose endpoints serve many ports, where per-port work shows.
func BenchmarkRead(b *testing.B) {
	bench := dataplanetest.BenchState(1000, false).Services
	multi := map[string]*switchyardv1.ServiceView{"bench/multi": multiPortView(8, 50)}
	for _, tc := range []struct {
		name  string
		views map[string]*switchyardv1.ServiceView
	}{
		{"bench/services=1000", bench},
		{"multiport/ports=8,endpoints=50", multi},
	} {
		b.Run(tc.name, func(b *testing.B) {
			keys := slices.Sorted(maps.Keys(tc.views))
			skip := func(service, reason string) { b.Fatalf("%s: unexpected skip: %s", service, reason) }
			for b.Loop() {
				for _, k := range keys {
					for _, f := range []dataplane.Family{dataplane.IPv4, dataplane.IPv6} {
						if _, ok := serviceport.Read(k, tc.views[k], f, skip); !ok {
							b.Fatalf("%s refused", k)
						}
					}
				}
			}
		})
	}
}

// multiPortView is "bench/multi" with ports TCP ports p0.. and
// endpoints endpoints, each serving every port.
func multiPortView(ports, endpoints int) *switchyardv1.ServiceView {
	sv := &switchyardv1.ServiceView{
		Namespace: "bench", Name: "multi", Type: switchyardv1.ServiceType_SERVICE_TYPE_CLUSTER_IP,
		ClusterIps: []string{"10.96.0.1", "fd00::1"}, HasAnyEndpoints: true,
	}
	var eps []*switchyardv1.EndpointPort
	for p := range ports {
		name := fmt.Sprintf("p%d", p)
		sv.Ports = append(sv.Ports, &switchyardv1.ServicePort{Name: name, Protocol: switchyardv1.Protocol_PROTOCOL_TCP, Port: uint32(80 + p)})
		eps = append(eps, &switchyardv1.EndpointPort{Name: name, Port: uint32(8080 + p)})
	}
	for e := range endpoints {
		for _, addr := range []string{fmt.Sprintf("10.128.%d.%d", e/250, e%250+1), fmt.Sprintf("fd00:10::%x", e+1)} {
			sv.ClusterEndpoints = append(sv.ClusterEndpoints, &switchyardv1.Endpoint{Address: addr, Ready: true, Serving: true, Ports: eps})
		}
	}
	return sv
}
