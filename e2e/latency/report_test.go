package latency

import (
	"fmt"
	"math"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/switchyard-proxy/switchyard/e2e/testbed/launch"
)

func TestStats(t *testing.T) {
	xs := make([]float64, 100)
	for i := range xs {
		xs[i] = float64(100-i) / 1000 // 0.100 … 0.001
	}
	want := Stats{N: 100, Min: 0.001, P50: 0.05, P99: 0.099, Max: 0.1}
	if diff := cmp.Diff(want, stats(xs)); diff != "" {
		t.Errorf("stats (-want +got):\n%s", diff)
	}
	if got := stats([]float64{0.3}); got != (Stats{N: 1, Min: 0.3, P50: 0.3, P99: 0.3, Max: 0.3}) {
		t.Errorf("one value: %+v", got)
	}
	if got := stats(nil); got != (Stats{}) {
		t.Errorf("none: %+v", got)
	}
}

// TestHistogram: parse kube-proxy's buckets, take a difference and
// estimate quantiles as histogram_quantile would.
func TestHistogram(t *testing.T) {
	scrape := func(text string) histogram {
		m, err := launch.ParseMetrics(strings.NewReader(text))
		if err != nil {
			t.Fatal(err)
		}
		h, err := parseHistogram(m, programmingMetric)
		if err != nil {
			t.Fatal(err)
		}
		return h
	}
	before := scrape(programmingText([]int{1, 1, 1, 1}, 0.1))
	after := scrape(programmingText([]int{2, 3, 5, 5}, 2.1))
	d := after.minus(before)
	if d.Count != 4 || math.Abs(d.Sum-2.0) > 1e-9 {
		t.Fatalf("difference: %+v", d)
	}
	// 4 observations: 1 ≤ 0.25, 1 in (0.25, 0.5], 2 in (0.5, 1].
	for q, want := range map[float64]float64{0.25: 0.25, 0.5: 0.5, 0.75: 0.75, 1: 1} {
		if got := d.quantile(q); math.Abs(got-want) > 1e-9 {
			t.Errorf("quantile(%v) = %v, want %v", q, got, want)
		}
	}
	if got := scrape("other_metric 1\n"); got.Count != 0 {
		t.Errorf("a proxy without the histogram: %+v", got)
	}
}

// programmingText is the network programming histogram as kube-proxy's
// /metrics prints it: buckets holds the cumulative counts of le 0.25,
// 0.5, 1 and +Inf (the last is the count), sum the observations' sum.
func programmingText(buckets []int, sum float64) string {
	var b strings.Builder
	for i, le := range []string{"0.25", "0.5", "1", "+Inf"} {
		fmt.Fprintf(&b, "kubeproxy_network_programming_duration_seconds_bucket{le=%q} %d\n", le, buckets[i])
	}
	fmt.Fprintf(&b, "kubeproxy_network_programming_duration_seconds_sum %v\n", sum)
	fmt.Fprintf(&b, "kubeproxy_network_programming_duration_seconds_count %d\n", buckets[3])
	return b.String()
}

// TestReport: ratios pair each kube-proxy record with Switchyard's of the
// same mode and run, and the markdown carries every record and ratio.
func TestReport(t *testing.T) {
	rec := func(proxy, kind, mode string, run int, p50 float64) Record {
		return Record{Proxy: proxy, Kind: kind, Mode: mode, Run: run, All: Stats{N: 100, P50: p50, P99: 2 * p50, Max: 3 * p50}}
	}
	rep := &Report{Settings: Settings{Runs: 2, Events: 100, Nodes: 2, BaseReplicas: 1, GapSeconds: 2,
		Proxies: []string{"switchyard-iptables", "kube-proxy-iptables"}},
		Records: []Record{
			rec("switchyard-iptables", "switchyard", "iptables", 1, 0.05),
			rec("kube-proxy-iptables", "kube-proxy", "iptables", 1, 0.1),
			rec("switchyard-iptables", "switchyard", "iptables", 2, 0.04),
			rec("kube-proxy-iptables", "kube-proxy", "iptables", 2, 0.12),
		}}
	rep.ComputeRatios()
	var p50 []float64
	for _, r := range rep.Ratios {
		if r.Stat == "p50" {
			p50 = append(p50, r.Ratio)
		}
	}
	if diff := cmp.Diff([]float64{2, 3}, p50); diff != "" {
		t.Errorf("p50 ratios (-want +got):\n%s", diff)
	}
	md := Markdown(rep)
	for _, want := range []string{"| switchyard-iptables | 1 | 100 | 50 | 100 | 150 |", "| iptables | 2 | 3.00× (120 vs 40)",
		"| kube-proxy-iptables | 2 | 100 / 100 |", "| iptables | 2 | 2.00× / 2.00× |"} {
		if !strings.Contains(md, want) {
			t.Errorf("markdown lacks %q:\n%s", want, md)
		}
	}
}
