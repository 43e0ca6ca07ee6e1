package compare

import (
	"context"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/switchyard-proxy/switchyard/e2e/testbed/launch"
	"github.com/switchyard-proxy/switchyard/e2e/testbed/netns"
)

// nsHTTPClient returns an HTTP client whose connections are opened inside
// ns, for scraping metrics served on the namespace's loopback.
func nsHTTPClient(topo *netns.Topology, ns string) *http.Client {
	return topo.HTTPClient(ns, 10*time.Second)
}

// metrics is one scrape of a Prometheus text endpoint: series (name with
// labels, as written) to value.
type metrics map[string]float64

// scrape reads a proxy's /metrics with c (one that dials in its namespace).
func scrape(ctx context.Context, c *http.Client, url string) (metrics, error) {
	m, err := launch.ScrapeMetrics(ctx, c, url)
	return metrics(m), err
}

// get returns the series name, or its ip_family="IPv4" instance (kube-proxy
// labels most of its metrics with the family; the agent does not).
func (m metrics) get(name string) float64 {
	if v, ok := m[name]; ok {
		return v
	}
	return m[name+`{ip_family="IPv4"}`]
}

// Names of kube-proxy's metrics, which the Switchyard agent exports too.
const (
	metricProgrammingSum   = "kubeproxy_network_programming_duration_seconds_sum"
	metricProgrammingCount = "kubeproxy_network_programming_duration_seconds_count"
	metricLastSync         = "kubeproxy_sync_proxy_rules_last_timestamp_seconds"
	metricSyncCount        = "kubeproxy_sync_proxy_rules_duration_seconds_count"
)

// programmingDelta returns the latency of the single observation added to
// kube-proxy's network-programming histogram between before and after, or 0
// when not exactly one was added.
func programmingDelta(before, after metrics) float64 {
	if before == nil || after == nil || after.get(metricProgrammingCount)-before.get(metricProgrammingCount) != 1 {
		return 0
	}
	return after.get(metricProgrammingSum) - before.get(metricProgrammingSum)
}

// logTail returns the last n lines of a file, for errors.
func logTail(path string, n int) string {
	data, err := os.ReadFile(path)
	if err != nil {
		return "(unreadable: " + err.Error() + ")"
	}
	lines := strings.Split(strings.TrimRight(string(data), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
