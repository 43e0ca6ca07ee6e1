package launch

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

const exposition = `# HELP x
# TYPE kubeproxy_network_programming_duration_seconds histogram
kubeproxy_network_programming_duration_seconds_bucket{le="0.25"} 1
kubeproxy_network_programming_duration_seconds_sum 0.125
kubeproxy_network_programming_duration_seconds_count 2
kubeproxy_sync_proxy_rules_last_timestamp_seconds 1.7e+09
apiserver_longrunning_requests{resource="nodes",verb="WATCH"} 3
apiserver_longrunning_requests{resource="pods",verb="LIST"} 9
apiserver_longrunning_requests{resource="services",verb="WATCH"} 4
apiserver_longrunning_requests_total 100
with_ts 3 1700000000000
not_a_number NaNa
`

func TestParseMetrics(t *testing.T) {
	m, err := ParseMetrics(strings.NewReader(exposition))
	if err != nil {
		t.Fatal(err)
	}
	want := Metrics{
		`kubeproxy_network_programming_duration_seconds_bucket{le="0.25"}`: 1,
		"kubeproxy_network_programming_duration_seconds_sum":               0.125,
		"kubeproxy_network_programming_duration_seconds_count":             2,
		"kubeproxy_sync_proxy_rules_last_timestamp_seconds":                1.7e9,
		`apiserver_longrunning_requests{resource="nodes",verb="WATCH"}`:    3,
		`apiserver_longrunning_requests{resource="pods",verb="LIST"}`:      9,
		`apiserver_longrunning_requests{resource="services",verb="WATCH"}`: 4,
		"apiserver_longrunning_requests_total":                             100,
		"with_ts":                                                          3,
	}
	if d := cmp.Diff(want, m); d != "" {
		t.Errorf("ParseMetrics (-want +got):\n%s", d)
	}
}

func TestMetricsSum(t *testing.T) {
	m, err := ParseMetrics(strings.NewReader(exposition))
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		metric string
		match  []string
		want   float64
		ok     bool
	}{
		{"apiserver_longrunning_requests", []string{`verb="WATCH"`}, 7, true},
		{"apiserver_longrunning_requests", nil, 16, true},
		{"apiserver_longrunning_requests", []string{`verb="WATCH"`, `resource="pods"`}, 0, false},
		{"apiserver_longrunning_requests_total", nil, 100, true},
		{"apiserver_registered_watchers", nil, 0, false},
	} {
		got, err := m.Sum(tc.metric, tc.match...)
		if got != tc.want || (err == nil) != tc.ok {
			t.Errorf("Sum(%s, %v) = %v, %v; want %v, ok %v", tc.metric, tc.match, got, err, tc.want, tc.ok)
		}
	}
}

func TestScrapeMetrics(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/metrics" {
			http.NotFound(w, r)
			return
		}
		_, _ = w.Write([]byte(exposition))
	}))
	defer srv.Close()
	m, err := ScrapeMetrics(t.Context(), srv.Client(), srv.URL+"/metrics")
	if err != nil || m["with_ts"] != 3 {
		t.Errorf("ScrapeMetrics = %v, %v", m, err)
	}
	if _, err := ScrapeMetrics(t.Context(), srv.Client(), srv.URL+"/other"); err == nil || !strings.Contains(err.Error(), "404") {
		t.Errorf("ScrapeMetrics of a 404 = %v", err)
	}
}
