package compare

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestCountIPs(t *testing.T) {
	dump := []byte(`-A KUBE-SERVICES -d 10.96.1.1/32 -p tcp -j KUBE-SVC-A
-A KUBE-SERVICES -d 10.96.1.10/32 -p tcp -j KUBE-SVC-B
-A X -d 110.96.1.2/32
	10.96.1.3 . tcp . 80 : goto service-x
-A KUBE-SERVICES -d 10.96.0.1/32 -j KUBE-SVC-K`)
	want := map[string]bool{"10.96.1.1": true, "10.96.1.2": true, "10.96.1.3": true, "10.96.1.10": true}
	if got := countIPs(dump, []byte("10.96."), want); got != 3 {
		t.Errorf("countIPs = %d, want 3 (10.96.1.2 only as part of 110.96.1.2)", got)
	}
}

func TestHasIP(t *testing.T) {
	for _, tc := range []struct {
		dump string
		want bool
	}{
		{"-j DNAT --to-destination 10.245.0.1:8080", true},
		{"chain endpoint-X-compare/s1/tcp/http__10.245.0.1/8080 {", true},
		{"--to-destination 10.245.0.11:8080", false},
		{"--to-destination 110.245.0.1:8080", false},
		{"10.245.0.1", true},
		{"", false},
	} {
		if got := hasIP("10.245.0.1")([]byte(tc.dump)); got != tc.want {
			t.Errorf("hasIP(%q) = %v, want %v", tc.dump, got, tc.want)
		}
	}
}

func TestProgrammingDelta(t *testing.T) {
	before := metrics{metricProgrammingSum: 0.125, metricProgrammingCount: 2}
	after := metrics{metricProgrammingSum: 0.625, metricProgrammingCount: 3}
	if got := programmingDelta(before, after); got != 0.5 {
		t.Errorf("programmingDelta = %v, want 0.5", got)
	}
	after[metricProgrammingCount] = 4
	if got := programmingDelta(before, after); got != 0 {
		t.Errorf("programmingDelta over two observations = %v, want 0", got)
	}
	if got := (metrics{metricProgrammingCount + `{ip_family="IPv4"}`: 7}).get(metricProgrammingCount); got != 7 {
		t.Errorf("get of an ip_family series = %v, want 7", got)
	}
}

func TestSummaryAndRatios(t *testing.T) {
	kp := Record{Services: 10, Proxy: ProxyKubeProxy, Mode: "iptables", FirstSyncSeconds: 4, RSSBytes: 40 << 20, HWMBytes: 50 << 20,
		Changes: []Change{{Seconds: 3}, {Seconds: 1, ProgrammingSeconds: 0.9}, {Seconds: 2}}}
	sy := Record{Services: 10, Proxy: ProxySwitchyard, Mode: "iptables", FirstSyncSeconds: 2, RSSBytes: 20 << 20, HWMBytes: 25 << 20,
		Changes: []Change{{Seconds: 0.5}, {Seconds: 0.25}}}
	kp.summarize()
	sy.summarize()
	if kp.ChangeMinSeconds != 1 || kp.ChangeMedianSeconds != 2 || kp.ProgrammingMedianSeconds != 0.9 {
		t.Errorf("kube-proxy summary %+v", kp)
	}
	if sy.ChangeMedianSeconds != 0.375 {
		t.Errorf("even median = %v, want 0.375", sy.ChangeMedianSeconds)
	}
	rs := computeRatios([]Record{kp, sy})
	got := map[string]float64{}
	for _, r := range rs {
		got[r.Metric] = r.Ratio
	}
	want := map[string]float64{"first sync (s)": 2, "change median (s)": 2 / 0.375, "change min (s)": 4,
		"node RSS (MiB)": 2, "node peak RSS (MiB)": 2}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("ratios (-want +got):\n%s", d)
	}
	var b strings.Builder
	rep := &Report{Records: []Record{kp, sy}, Ratios: rs, Settings: Settings{EndpointsPerService: 5, Changes: 3}}
	if err := rep.WriteMarkdown(&b); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(b.String(), "| 10 | kube-proxy/iptables | 4.00 s | 1.00 s | 2.00 s | 900 ms |") {
		t.Errorf("markdown:\n%s", b.String())
	}
}

func TestRuleMonitorWrite(t *testing.T) {
	m := &ruleMonitor{watches: map[string]watch{}}
	ch := m.watch("10.245.0.1")
	other := m.watch("10.245.0.2")
	for _, chunk := range []string{"add rule ip nat KUBE-SEP-X meta l4proto tcp dnat to 10.245.0.11:8080\nadd rule ip nat KUBE-SEP-Y meta l4proto tcp dn", "at to 10.245.0.1:8080\n# new generation 3\n"} {
		if _, err := m.Write([]byte(chunk)); err != nil {
			t.Fatal(err)
		}
	}
	select {
	case <-ch:
	default:
		t.Error("10.245.0.1 not seen across a chunk boundary")
	}
	select {
	case <-other:
		t.Error("10.245.0.2 seen but never written")
	default:
	}
	if m.lines != 3 {
		t.Errorf("lines = %d, want 3", m.lines)
	}
}
