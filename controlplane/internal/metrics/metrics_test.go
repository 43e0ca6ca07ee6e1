package metrics_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/switchyard-proxy/switchyard/controlplane/internal/apistatus"
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

// TestAPIStatusMetrics: one series per resource, read from the tracker at
// scrape time: the seconds of an outage grow between events.
func TestAPIStatusMetrics(t *testing.T) {
	now := time.Unix(1000, 0)
	tr := apistatus.New(apistatus.Options{Now: func() time.Time { return now }})
	reg := prometheus.NewPedanticRegistry()
	if err := metrics.RegisterAPIStatus(reg, tr); err != nil {
		t.Fatal(err)
	}
	forbidden := apierrors.NewForbidden(schema.GroupResource{Resource: "nodes"}, "", errors.New("rbac"))
	if _, err := tr.Wrap("services", stubLW{}).List(metav1.ListOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := tr.Wrap("nodes", stubLW{err: forbidden}).List(metav1.ListOptions{}); err == nil {
		t.Fatal("List of nodes succeeded, want forbidden")
	}
	tr.Register("servicecidrs")
	now = now.Add(42 * time.Second)
	want := `
# HELP switchyard_controlplane_api_available 1 when the resource's last list or watch reached the Kubernetes API, else 0 (views may be stale).
# TYPE switchyard_controlplane_api_available gauge
switchyard_controlplane_api_available{resource="nodes"} 0
switchyard_controlplane_api_available{resource="servicecidrs"} 0
switchyard_controlplane_api_available{resource="services"} 1
# HELP switchyard_controlplane_api_errors_total Lists and watches of the resource that failed to reach the Kubernetes API.
# TYPE switchyard_controlplane_api_errors_total counter
switchyard_controlplane_api_errors_total{resource="nodes"} 1
switchyard_controlplane_api_errors_total{resource="servicecidrs"} 0
switchyard_controlplane_api_errors_total{resource="services"} 0
# HELP switchyard_controlplane_api_unavailable_seconds Seconds since the resource's list or watch stopped reaching the Kubernetes API; 0 while it does.
# TYPE switchyard_controlplane_api_unavailable_seconds gauge
switchyard_controlplane_api_unavailable_seconds{resource="nodes"} 42
switchyard_controlplane_api_unavailable_seconds{resource="servicecidrs"} 0
switchyard_controlplane_api_unavailable_seconds{resource="services"} 0
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want)); err != nil {
		t.Error(err)
	}
}

// stubLW answers every list and watch, or fails them with err.
type stubLW struct{ err error }

func (s stubLW) List(metav1.ListOptions) (runtime.Object, error) {
	if s.err != nil {
		return nil, s.err
	}
	return &metav1.List{}, nil
}

func (s stubLW) Watch(metav1.ListOptions) (watch.Interface, error) {
	if s.err != nil {
		return nil, s.err
	}
	return watch.NewFake(), nil
}

// TestCertificateMetrics: loads count by file and result, the expiry is
// the last one reported.
func TestCertificateMetrics(t *testing.T) {
	reg := prometheus.NewPedanticRegistry()
	c, err := metrics.RegisterCertificates(reg)
	if err != nil {
		t.Fatal(err)
	}
	c.Loaded("/etc/switchyard/tls/tls.crt", nil)
	c.Loaded("/etc/switchyard/tls/tls.crt", errors.New("cut short"))
	c.Loaded("/etc/switchyard/tls/tls.crt", nil)
	c.Expiry("/etc/switchyard/tls/tls.crt", time.Unix(1800000000, 0))
	c.Expiry("/etc/switchyard/tls/tls.crt", time.Unix(1900000000, 0))
	want := `
# HELP switchyard_controlplane_certificate_expiry_timestamp_seconds NotAfter of the certificate in use from the file (a CA bundle: its first certificate to expire), in seconds since the epoch.
# TYPE switchyard_controlplane_certificate_expiry_timestamp_seconds gauge
switchyard_controlplane_certificate_expiry_timestamp_seconds{file="/etc/switchyard/tls/tls.crt"} 1.9e+09
# HELP switchyard_controlplane_certificate_reloads_total Loads of new content of the TLS files (--tls-cert-file, --client-ca-file), by file and result (ok: served from the next handshake; failed: unreadable, cut short, garbage or a key that does not match, the last good one kept).
# TYPE switchyard_controlplane_certificate_reloads_total counter
switchyard_controlplane_certificate_reloads_total{file="/etc/switchyard/tls/tls.crt",result="failed"} 1
switchyard_controlplane_certificate_reloads_total{file="/etc/switchyard/tls/tls.crt",result="ok"} 2
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want)); err != nil {
		t.Error(err)
	}
	var none *metrics.Certificates
	none.Loaded("x", nil)
	none.Expiry("x", time.Time{})
}
