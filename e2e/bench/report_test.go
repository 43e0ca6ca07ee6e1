package bench

import (
	"bytes"
	"strings"
	"testing"
	"time"
)

func TestSumMetric(t *testing.T) {
	in := `# HELP x
apiserver_longrunning_requests{resource="nodes",verb="WATCH"} 3
apiserver_longrunning_requests{resource="pods",verb="LIST"} 9
apiserver_longrunning_requests{resource="services",verb="WATCH"} 4
apiserver_longrunning_requests_total 100
`
	got, err := sumMetric(strings.NewReader(in), "apiserver_longrunning_requests", []string{`verb="WATCH"`})
	if err != nil || got != 7 {
		t.Errorf("sum = %v, %v; want 7", got, err)
	}
	if by := diffByResource(watchesByResource([]byte(in)), map[string]float64{"nodes": 1}); by != "nodes +2, services +4" {
		t.Errorf("by resource %q", by)
	}
}

func TestPercentile(t *testing.T) {
	var xs []time.Duration
	for i := 1; i <= 100; i++ {
		xs = append(xs, time.Duration(i))
	}
	if p := percentile(xs, 0.5); p != 50 {
		t.Errorf("p50 = %v", p)
	}
	if p := percentile(xs, 0.99); p != 99 {
		t.Errorf("p99 = %v", p)
	}
}

func TestMarkdownRatios(t *testing.T) {
	recs := []Record{
		{Kind: "fanout", Path: PathFake, Mode: "delta", Agents: 10, Services: 1000, Endpoints: 10, BytesPerChange: 100, CPUPerChangeSec: 1, LatencyP99MS: 1, AllAckedMS: 1},
		{Kind: "fanout", Path: PathFake, Mode: "sotw", Agents: 10, Services: 1000, Endpoints: 10, BytesPerChange: 1000, CPUPerChangeSec: 2, LatencyP99MS: 3, AllAckedMS: 4},
		{Kind: "apiload", Setup: "switchyard", Agents: 10, LongRunning: 3, Watchers: -1},
	}
	var b bytes.Buffer
	if err := Markdown(&b, recs); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"| fake | 10 | 1k × 10 | 10.0× | 2.0× | 3.0× | 4.0× |", "| switchyard | 10 | 1 | 3 | n/a |"} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("markdown lacks %q:\n%s", want, b.String())
		}
	}
}
