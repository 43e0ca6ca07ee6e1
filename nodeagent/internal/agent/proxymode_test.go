package agent

import (
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/switchyard-proxy/switchyard/nodeagent/internal/discovery/cptest"
	"github.com/switchyard-proxy/switchyard/nodeagent/internal/health"
	"github.com/switchyard-proxy/switchyard/nodeagent/internal/metrics"
	"github.com/switchyard-proxy/switchyard/nodeagent/internal/runtest"
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

// TestHealthAddressHeldByKubeProxy: an agent started while kube-proxy still
// runs on the node, holding the health port the agent shares with it,
// forwards at once (its syncs do not wait for the port) and serves the
// port as soon as kube-proxy let it go, marked as the agent's own.
func TestHealthAddressHeldByKubeProxy(t *testing.T) {
	held, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := held.Addr().String()
	cp := cptest.New(t)
	n := startNode(t, nodeOpts{addrs: []string{cp.Addr()}, stateDir: t.TempDir(), options: func(o *Options) { o.HealthzAddr = addr }})
	cp.Next()
	push(cp, "s1", "n1", nil, svc("ns/a", "1"))
	expectAck(t, cp, "n1", "s1")
	if got := n.a.HealthzAddr(); got != "" {
		t.Errorf("HealthzAddr %q while the port is held, want none", got)
	}
	if err := held.Close(); err != nil { // kube-proxy exits
		t.Fatal(err)
	}
	runtest.Eventually(t, "the agent serves the freed health port", func() bool {
		resp, err := http.Get("http://" + addr + "/livez")
		if err != nil {
			return false
		}
		_ = resp.Body.Close()
		return resp.Header.Get(health.AgentHeader) != ""
	})
}
