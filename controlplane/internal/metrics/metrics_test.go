package metrics_test

import (
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/switchyard-proxy/switchyard/controlplane/internal/metrics"
)

func TestMetrics(t *testing.T) {
	reg := prometheus.NewPedanticRegistry()
	m, err := metrics.New(reg)
	if err != nil {
		t.Fatal(err)
	}
	m.StreamOpened("delta")
	m.StreamOpened("delta")
	m.StreamClosed("delta")
	m.ResponseSent("delta", 100)
	m.ResponseSent("delta", 50)
	m.Acked("delta", 3*time.Millisecond)
	m.Nacked("sotw")
	m.AgentApplied(10*time.Millisecond, 1500*time.Millisecond)
	m.AgentApplied(0, 0)
	m.ObserveCompute(time.Millisecond)
	m.InformerEvent("Service", "add")
	m.InputSkipped("EndpointSlice", "MissingServiceName")
	m.DeltaStreamStarted(0, 4)
	m.DeltaStreamStarted(3, 1)

	tests := []struct {
		name string
		want string
	}{
		{"switchyard_controlplane_connected_agents", `
# HELP switchyard_controlplane_connected_agents Node agents with an open discovery stream, by rpc.
# TYPE switchyard_controlplane_connected_agents gauge
switchyard_controlplane_connected_agents{rpc="delta"} 1
`},
		{"switchyard_controlplane_response_bytes_sent_total", `
# HELP switchyard_controlplane_response_bytes_sent_total Encoded bytes of discovery responses sent to node agents, by rpc.
# TYPE switchyard_controlplane_response_bytes_sent_total counter
switchyard_controlplane_response_bytes_sent_total{rpc="delta"} 150
`},
		{"switchyard_controlplane_nacks_total", `
# HELP switchyard_controlplane_nacks_total Discovery responses rejected by node agents, by rpc.
# TYPE switchyard_controlplane_nacks_total counter
switchyard_controlplane_nacks_total{rpc="sotw"} 1
`},
		{"switchyard_controlplane_informer_events_total", `
# HELP switchyard_controlplane_informer_events_total Kubernetes API events received, by kind and type.
# TYPE switchyard_controlplane_informer_events_total counter
switchyard_controlplane_informer_events_total{kind="Service",type="add"} 1
`},
		{"switchyard_controlplane_skipped_input_total", `
# HELP switchyard_controlplane_skipped_input_total API objects skipped, or parts of them dropped or clamped, by kind and reason.
# TYPE switchyard_controlplane_skipped_input_total counter
switchyard_controlplane_skipped_input_total{kind="EndpointSlice",reason="MissingServiceName"} 1
`},
		{"switchyard_controlplane_delta_initial_resources_total", `
# HELP switchyard_controlplane_delta_initial_resources_total Resources of a node's view at the first batch of a delta stream, by outcome: resumed (the agent already had them, not sent) or sent.
# TYPE switchyard_controlplane_delta_initial_resources_total counter
switchyard_controlplane_delta_initial_resources_total{outcome="resumed"} 3
switchyard_controlplane_delta_initial_resources_total{outcome="sent"} 5
`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if err := testutil.GatherAndCompare(reg, strings.NewReader(tt.want), tt.name); err != nil {
				t.Error(err)
			}
		})
	}
	counts := map[string]int{
		"switchyard_network_programming_duration_seconds":  1,
		"switchyard_agent_apply_duration_seconds":          1,
		"switchyard_controlplane_ack_latency_seconds":      1,
		"switchyard_controlplane_compute_duration_seconds": 1,
		"switchyard_controlplane_responses_sent_total":     1,
	}
	for name, want := range counts {
		if got, err := testutil.GatherAndCount(reg, name); err != nil || got != want {
			t.Errorf("%s: %d series (err %v), want %d", name, got, err, want)
		}
	}
	if _, err := metrics.New(reg); err == nil {
		t.Error("registering twice succeeded")
	}
}

func TestNilMetricsRecordNothing(t *testing.T) {
	var m *metrics.Metrics
	m.StreamOpened("delta")
	m.ResponseSent("delta", 1)
	m.Acked("delta", time.Second)
	m.Nacked("delta")
	m.AgentApplied(time.Second, time.Second)
	m.ObserveCompute(time.Second)
	m.InformerEvent("Node", "delete")
	m.InputSkipped("Node", "InvalidName")
	m.DeltaStreamStarted(1, 1)
	m.StreamClosed("delta")
}
