package compare

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/switchyard-proxy/switchyard/e2e/testbed/traffic"
)

func TestSampleServices(t *testing.T) {
	for _, tc := range []struct{ services, n, want int }{
		{services: 1, n: 32, want: 1},
		{services: 20, n: 5, want: 5},
		{services: 1000, n: 32, want: 32},
		{services: 30000, n: 5000, want: 2768}, // the node port range
	} {
		got := sampleServices(tc.services, tc.n)
		if len(got) != tc.want || got[0] != 0 || got[len(got)-1] != tc.services-1 {
			t.Errorf("sampleServices(%d, %d): %d picked, first %d, last %d; want %d from 0 to %d",
				tc.services, tc.n, len(got), got[0], got[len(got)-1], tc.want, tc.services-1)
		}
		if diff := cmp.Diff(got, sampleServices(tc.services, tc.n)); diff != "" {
			t.Errorf("sampleServices(%d, %d) differs between calls (-first +second):\n%s", tc.services, tc.n, diff)
		}
	}
}

func TestSummarizeDataPath(t *testing.T) {
	rec := func(proxy, mode string, p50, perSecond float64) Record {
		return Record{Services: 10, Proxy: proxy, Mode: mode, DataPath: &DataPathResult{
			ClusterIP: traffic.Latency{P50: p50}, NodePort: traffic.Latency{P50: p50},
			Rate: traffic.RateResult{PerSecond: perSecond}}}
	}
	recs := []Record{
		rec(ProxyNone, ModeDirect, 40, 4000), rec(ProxyKubeProxy, "iptables", 200, 1000), rec(ProxySwitchyard, "iptables", 50, 2000),
		rec(ProxyNone, ModeDirect, 60, 4000), rec(ProxyKubeProxy, "iptables", 300, 1000), rec(ProxySwitchyard, "iptables", 70, 3000),
		{Services: 10, Proxy: ProxySwitchyard, Mode: "nftables", Error: "skipped"}, // no data path: left out
	}
	rep := summarizeDataPath(recs)
	if len(rep.Summaries) != 3 {
		t.Fatalf("%d summaries, want 3", len(rep.Summaries))
	}
	sy := rep.Summaries[2]
	if got := sy.Metrics[0]; got.Min != 50 || got.Median != 60 || got.Max != 70 {
		t.Errorf("switchyard ClusterIP p50 over runs %+v, want min 50, median 60, max 70", got)
	}
	ratios := map[string]float64{}
	for _, r := range rep.VsKubeProxy {
		ratios[r.Metric] = r.Ratio
	}
	// kube-proxy median p50 250 ÷ Switchyard's 60; rate 2500 ÷ 1000.
	if got := ratios["ClusterIP p50 µs"]; got < 4.16 || got > 4.17 {
		t.Errorf("ClusterIP p50 ratio %v, want 250/60", got)
	}
	if got := ratios["new conn/s"]; got != 2.5 {
		t.Errorf("conn/s ratio %v, want 2.5 (Switchyard's more)", got)
	}
	for _, r := range rep.VsFloor {
		if r.Candidate == "switchyard/iptables" && r.Metric == "ClusterIP p50 µs" && r.Ratio != 1.2 {
			t.Errorf("switchyard vs floor %v, want 60/50", r.Ratio)
		}
	}
	var b strings.Builder
	writeDataPath(&b, rep)
	for _, want := range []string{"| 10 | switchyard/iptables | 2 | 0 | 50 / 60 |", "Switchyard vs kube-proxy's same mode", "÷ the no-proxy floor"} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("markdown lacks %q:\n%s", want, b.String())
		}
	}
}
