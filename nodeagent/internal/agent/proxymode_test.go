package agent

import (
	"io"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/switchyard-proxy/switchyard/nodeagent/internal/metrics"
	switchyardv1 "github.com/switchyard-proxy/switchyard/proto/switchyard/v1"
)

// TestProxyMode: the metrics port answers /proxyMode with the mode in use,
// as kube-proxy does on its metrics port (10249).
func TestProxyMode(t *testing.T) {
	for _, tc := range []struct {
		mode switchyardv1.DataplaneMode
		want string
	}{
		{switchyardv1.DataplaneMode_DATAPLANE_MODE_IPTABLES, "iptables"},
		{switchyardv1.DataplaneMode_DATAPLANE_MODE_NFTABLES, "nftables"},
		{switchyardv1.DataplaneMode_DATAPLANE_MODE_IPVS, "ipvs"},
		{switchyardv1.DataplaneMode_DATAPLANE_MODE_USERSPACE, "userspace"},
		{switchyardv1.DataplaneMode_DATAPLANE_MODE_DRY_RUN, "dry-run"},
		{switchyardv1.DataplaneMode_DATAPLANE_MODE_UNSPECIFIED, ""},
	} {
		mux := metricsMux(metrics.New(), func() switchyardv1.DataplaneMode { return tc.mode }, false)
		rec := httptest.NewRecorder()
		mux.ServeHTTP(rec, httptest.NewRequest("GET", "/proxyMode", nil))
		body, _ := io.ReadAll(rec.Body)
		if rec.Code != 200 || string(body) != tc.want {
			t.Errorf("%v: /proxyMode = %d %q, want 200 %q", tc.mode, rec.Code, body, tc.want)
		}
	}
}

// Profiles are served only when asked for: they expose the process.
func TestProfilingOnlyWhenEnabled(t *testing.T) {
	for _, on := range []bool{false, true} {
		mux := metricsMux(metrics.New(), func() switchyardv1.DataplaneMode { return 0 }, on)
		rec := httptest.NewRecorder()
		mux.ServeHTTP(rec, httptest.NewRequest("GET", "/debug/pprof/heap?debug=1", nil))
		body, _ := io.ReadAll(rec.Body)
		if got := rec.Code == 200 && strings.Contains(string(body), "heap profile"); got != on {
			t.Errorf("profiling %v: /debug/pprof/heap = %d (%.40q)", on, rec.Code, body)
		}
	}
}
