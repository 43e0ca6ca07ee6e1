package dataplanetest

import (
	"fmt"
	"maps"
	"testing"

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

// BenchApplyOneEndpoint measures partial syncs in which one endpoint of
// one service ("bench/s7") moves back and forth, at 1k/5k/10k
// BenchServices, over the dataplane newDP returns (one per size);
// hinted passes the agent's ApplyOptions.Changed. Successive states share
// every other service's message, as the agent's do. Every mode's
// BenchmarkApplyOneEndpoint runs this, so their numbers compare.
func BenchApplyOneEndpoint(b *testing.B, newDP func(b *testing.B) dataplane.Dataplane, hinted bool) {
	var hint map[string]struct{}
	if hinted {
		hint = map[string]struct{}{"bench/s7": {}}
	}
	for _, n := range []int{1000, 5000, 10000} {
		b.Run(fmt.Sprintf("services=%d", n), func(b *testing.B) {
			dp := newDP(b)
			st := BenchState(n, false)
			moved := &dataplane.State{Config: st.Config, Services: maps.Clone(st.Services)}
			moved.Services["bench/s7"] = BenchService(7, true)
			ctx := b.Context()
			if err := dp.Apply(ctx, st, dataplane.ApplyOptions{}); err != nil {
				b.Fatal(err)
			}
			i := 0
			for b.Loop() {
				next := st
				if i++; i%2 == 1 {
					next = moved
				}
				if err := dp.Apply(ctx, next, dataplane.ApplyOptions{Changed: hint}); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
