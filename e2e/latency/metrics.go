package latency

import (
	"context"
	"math"
	"net"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/switchyard-proxy/switchyard/e2e/cluster"
	"github.com/switchyard-proxy/switchyard/e2e/testbed/launch"
)

// programmingMetric is kube-proxy's network-programming histogram, which
// Switchyard's agent exports under the same name and buckets: from the
// EndpointSlice's last-change-trigger-time annotation (the pod's Ready
// lastTransitionTime, whole seconds) to the end of the sync that
// programmed the change.
const programmingMetric = "kubeproxy_network_programming_duration_seconds"

// metricsAddr is where both proxies serve /metrics inside a node's
// network namespace: kube-proxy on every address (the bed's
// metricsBindAddress 0.0.0.0:10249), the agent on loopback (its default).
const metricsAddr = "127.0.0.1:10249"

// histogram is one scrape of programmingMetric: cumulative bucket counts
// by upper bound, the count and the sum.
type histogram struct {
	Buckets map[float64]float64 `json:"-"`
	Count   float64             `json:"count"`
	Sum     float64             `json:"sum"`
}

// metricsClient is an HTTP client for node i's /metrics whose connection
// is opened inside the node's network namespace and kept open: later
// scrapes cost the proxy's response and the parse, not a namespace switch
// and a handshake, so one can run beside the reads that time an event.
func metricsClient(c *cluster.Cluster, i int) *http.Client {
	return &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{
		MaxIdleConns: 1,
		DialContext: func(ctx context.Context, _, addr string) (net.Conn, error) {
			return c.NodeDialContext(ctx, i, addr)
		},
	}}
}

// scrapeHistogram reads programmingMetric through client.
func scrapeHistogram(ctx context.Context, client *http.Client) (histogram, error) {
	m, err := launch.ScrapeMetrics(ctx, client, "http://"+metricsAddr+"/metrics")
	if err != nil {
		return histogram{}, err
	}
	return parseHistogram(m, programmingMetric)
}

// parseHistogram picks one histogram out of a scrape, summing series that
// differ in other labels (kube-proxy labels some metrics by IP family). A
// histogram not exposed yet is empty: the record's observation count says
// when a proxy never exposed it.
func parseHistogram(m launch.Metrics, name string) (histogram, error) {
	h := histogram{Buckets: map[float64]float64{}}
	var err error
	if h.Count, err = m.Sum(name + "_count"); err != nil {
		return h, nil
	}
	if h.Sum, err = m.Sum(name + "_sum"); err != nil {
		return h, err
	}
	for series, v := range m {
		metric, labels, ok := strings.Cut(series, "{")
		if !ok || metric != name+"_bucket" {
			continue
		}
		_, le, ok := strings.Cut(labels, `le="`)
		if !ok {
			continue
		}
		le, _, _ = strings.Cut(le, `"`)
		bound := math.Inf(1)
		if le != "+Inf" {
			if bound, err = strconv.ParseFloat(le, 64); err != nil {
				continue
			}
		}
		h.Buckets[bound] += v
	}
	return h, nil
}

// minus is h − before: the observations made in between.
func (h histogram) minus(before histogram) histogram {
	d := histogram{Buckets: map[float64]float64{}, Count: h.Count - before.Count, Sum: h.Sum - before.Sum}
	for le, v := range h.Buckets {
		d.Buckets[le] = v - before.Buckets[le]
	}
	return d
}

// add accumulates o into h.
func (h *histogram) add(o histogram) {
	if h.Buckets == nil {
		h.Buckets = map[float64]float64{}
	}
	h.Count += o.Count
	h.Sum += o.Sum
	for le, v := range o.Buckets {
		h.Buckets[le] += v
	}
}

// quantile estimates the q-quantile as Prometheus' histogram_quantile
// does: linear within the bucket that holds it. With kube-proxy's buckets
// (0.25, 0.5, 1, 2, 3 … s) it is coarse below a few seconds: a
// cross-check of the order of magnitude, not a measurement.
func (h histogram) quantile(q float64) float64 {
	if h.Count <= 0 {
		return 0
	}
	bounds := make([]float64, 0, len(h.Buckets))
	for le := range h.Buckets {
		bounds = append(bounds, le)
	}
	slices.Sort(bounds)
	rank := q * h.Count
	prevBound, prevCount := 0.0, 0.0
	for _, le := range bounds {
		n := h.Buckets[le]
		if n >= rank {
			if math.IsInf(le, 1) {
				return prevBound
			}
			if n == prevCount {
				return le
			}
			return prevBound + (le-prevBound)*(rank-prevCount)/(n-prevCount)
		}
		prevBound, prevCount = le, n
	}
	return prevBound
}
