package metrics

import (
	"errors"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
)

func TestNames(t *testing.T) {
	m := New()
	at := time.Unix(1700000000, 0)
	m.Synced(true, 20*time.Millisecond, at, "v1", 3)
	m.Synced(false, 10*time.Millisecond, at, "v2", 4)
	m.Changes(2, 1)
	m.ProgrammingLatency(time.Second)
	m.Connected("cp:18000", true)
	m.Nacked()
	m.StateRejected("empty")
	m.StateWriteFailed()
	m.DatapathProbeEnabled()
	m.DatapathProbed(ProbeOK, true)
	m.DatapathProbed(ProbeFailed, false)
	m.Certificates().Loaded("/ca.crt", nil)
	m.Certificates().Loaded("/ca.crt", errors.New("cut short"))
	m.Certificates().Expiry("/ca.crt", at)

	if got := testutil.ToFloat64(m.appliedVersion.WithLabelValues("v2")); got != 1 {
		t.Errorf("applied_version{v2} = %v", got)
	}
	if got := testutil.CollectAndCount(m.appliedVersion); got != 1 {
		t.Errorf("applied_version series = %d, want 1 (old version removed)", got)
	}
	rec := httptest.NewRecorder()
	m.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	body := rec.Body.String()
	for _, name := range []string{
		"kubeproxy_sync_proxy_rules_duration_seconds_count 2",
		"kubeproxy_sync_full_proxy_rules_duration_seconds_count 1",
		"kubeproxy_sync_partial_proxy_rules_duration_seconds_count 1",
		"kubeproxy_sync_proxy_rules_last_timestamp_seconds 1.7e+09",
		"kubeproxy_network_programming_duration_seconds_count 1",
		"kubeproxy_sync_proxy_rules_endpoint_changes_total 1",
		"kubeproxy_sync_proxy_rules_service_changes_total 2",
		`switchyard_agent_applied_version{version="v2"} 1`,
		"switchyard_agent_applied_resources 4",
		`switchyard_agent_control_plane_connected{address="cp:18000"} 1`,
		"switchyard_agent_nacks_total 1",
		`switchyard_agent_state_file_rejections_total{reason="empty"} 1`,
		"switchyard_agent_state_file_write_errors_total 1",
		`switchyard_agent_datapath_probes_total{result="ok"} 1`,
		`switchyard_agent_datapath_probes_total{result="failed"} 1`,
		"switchyard_agent_datapath_healthy 0",
		`switchyard_agent_certificate_reloads_total{file="/ca.crt",result="ok"} 1`,
		`switchyard_agent_certificate_reloads_total{file="/ca.crt",result="failed"} 1`,
		`switchyard_agent_certificate_expiry_timestamp_seconds{file="/ca.crt"} 1.7e+09`,
	} {
		if !strings.Contains(body, name+"\n") {
			t.Errorf("/metrics lacks %q", name)
		}
	}
}

func TestNilIsNoop(t *testing.T) {
	var m *Metrics
	m.Synced(true, 0, time.Time{}, "", 0)
	m.Queued(time.Time{})
	m.Changes(1, 1)
	m.ProgrammingLatency(0)
	m.SyncFailed()
	m.ModeSwitched()
	m.Nacked()
	m.Connected("x", true)
	m.StateRejected("empty")
	m.StateWriteFailed()
	m.DatapathProbeEnabled()
	m.DatapathProbed(ProbeOK, true)
	m.Certificates().Loaded("x", nil)
	m.Certificates().Expiry("x", time.Time{})
}

// TestDatapathHealthyOnlyWhenEnabled: an agent without the canary exports
// no datapath gauge (a 0 would read as a broken datapath); one with it
// starts at 1.
func TestDatapathHealthyOnlyWhenEnabled(t *testing.T) {
	scrape := func(m *Metrics) string {
		rec := httptest.NewRecorder()
		m.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
		return rec.Body.String()
	}
	m := New()
	if body := scrape(m); strings.Contains(body, "switchyard_agent_datapath_healthy") {
		t.Error("the gauge is exported with the canary off")
	}
	m.DatapathProbeEnabled()
	if body := scrape(m); !strings.Contains(body, "switchyard_agent_datapath_healthy 1\n") {
		t.Errorf("the gauge is not 1 with the canary on:\n%s", body)
	}
}
