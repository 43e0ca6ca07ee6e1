package compare

import (
	"net/netip"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	gnft "github.com/google/nftables"
	"github.com/google/nftables/expr"

	"github.com/switchyard-proxy/switchyard/e2e/testbed/ruleread"
)

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
	kp1 := Record{Run: 1, Services: 10, Proxy: ProxyKubeProxy, Mode: "iptables", FirstSyncSeconds: 4, RSSBytes: 40 << 20, HWMBytes: 50 << 20,
		Changes: []Change{{Seconds: 3}, {Seconds: 1, ProgrammingSeconds: 0.9}, {Seconds: 2}}}
	kp2 := Record{Run: 2, Services: 10, Proxy: ProxyKubeProxy, Mode: "iptables", FirstSyncSeconds: 6, RSSBytes: 40 << 20, HWMBytes: 60 << 20,
		Changes: []Change{{Seconds: 5}}}
	sy := Record{Run: 1, Services: 10, Proxy: ProxySwitchyard, Mode: "iptables", FirstSyncSeconds: 2, RSSBytes: 20 << 20, HWMBytes: 30 << 20,
		Changes: []Change{{Seconds: 0.5}, {Seconds: 0.25}}}
	for _, r := range []*Record{&kp1, &kp2, &sy} {
		r.summarize()
	}
	if kp1.ChangeMinSeconds != 1 || kp1.ChangeMedianSeconds != 2 || kp1.ProgrammingMedianSeconds != 0.9 {
		t.Errorf("kube-proxy run summary %+v", kp1)
	}
	if sy.ChangeMedianSeconds != 0.375 {
		t.Errorf("even median = %v, want 0.375", sy.ChangeMedianSeconds)
	}
	sums := summarizeRuns([]Record{kp1, sy, kp2})
	if len(sums) != 2 || sums[0].Name() != "kube-proxy/iptables" || sums[0].Runs != 2 {
		t.Fatalf("summaries %+v", sums)
	}
	k := sums[0]
	if k.FirstSyncMinSeconds != 4 || k.FirstSyncMedianSeconds != 5 || k.Changes != 4 ||
		k.ChangeMinSeconds != 1 || k.ChangeMedianSeconds != 2.5 || k.HWMMaxBytes != 60<<20 {
		t.Errorf("kube-proxy summary over runs %+v", k)
	}
	rs := computeRatios(sums)
	got := map[string]float64{}
	for _, r := range rs {
		got[r.Metric] = r.Ratio
	}
	want := map[string]float64{"first sync median (s)": 2.5, "first sync min (s)": 2, "change median (s)": 2.5 / 0.375,
		"change min (s)": 4, "node RSS median (MiB)": 2, "node peak RSS (MiB)": 2}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("ratios (-want +got):\n%s", d)
	}
	var b strings.Builder
	rep := &Report{Records: []Record{kp1, sy, kp2}, Summaries: sums, Ratios: rs, Settings: Settings{EndpointsPerService: 5, Changes: 3}}
	if err := rep.WriteMarkdown(&b); err != nil {
		t.Fatal(err)
	}
	for _, row := range []string{
		"| 10 | 1 | kube-proxy/iptables | 4.00 s | 1.00 s | 2.00 s | 900 ms |",
		"| 10 | kube-proxy/iptables | 2 | 4.00 s / 5.00 s | — | 4 | 1.00 s / 2.50 s | 900 ms |",
	} {
		if !strings.Contains(b.String(), row) {
			t.Errorf("markdown lacks %q:\n%s", row, b.String())
		}
	}
}

func TestLocate(t *testing.T) {
	kubeProxyIPT := `*nat
-A KUBE-SERVICES -d 110.96.1.1/32 -p tcp -m tcp --dport 80 -j KUBE-SVC-WRONG
-A KUBE-SERVICES -d 10.96.1.1/32 -p tcp -m comment --comment "compare/s00000:http cluster IP" -m tcp --dport 8080 -j KUBE-SVC-PORT
-A KUBE-SERVICES -d 10.96.1.1/32 -p tcp -m comment --comment "compare/s00000:http cluster IP" -m tcp --dport 80 -j KUBE-SVC-AAAA
-A KUBE-SVC-AAAA ! -s 10.244.0.0/16 -d 10.96.1.1/32 -p tcp -m tcp --dport 80 -j KUBE-MARK-MASQ
`
	switchyardIPT := `-A KUBE-SHARD-0A -d 10.96.1.1/32 -p tcp -m comment --comment "compare/s00000:http cluster IP" -m tcp --dport 80 -j KUBE-SVC-BBBB
`
	kubeProxyNFT := `table ip kube-proxy {
	map service-ips {
		type ipv4_addr . inet_proto . inet_service : verdict
		elements = { 110.96.1.1 . tcp . 80 : goto service-WRONG,
			     10.96.1.1 . tcp . 80 : goto service-ULMVA6XW-compare/s00000/tcp/http,
			     10.96.1.2 . tcp . 80 : goto service-OTHER }
	}
}`
	switchyardNFT := `	map service-ips {
		elements = { 10.96.1.1 . tcp . 80 : goto "svc-SUSTUHLJ-compare/s00000/tcp/http" }
	}`
	for _, tc := range []struct{ name, dump, mode, want string }{
		{"kube-proxy iptables", kubeProxyIPT, "iptables", "KUBE-SVC-AAAA"},
		{"switchyard iptables", switchyardIPT, "iptables", "KUBE-SVC-BBBB"},
		{"kube-proxy nftables", kubeProxyNFT, "nftables", "service-ULMVA6XW-compare/s00000/tcp/http"},
		{"switchyard nftables", switchyardNFT, "nftables", "svc-SUSTUHLJ-compare/s00000/tcp/http"},
	} {
		got, err := locate([]byte(tc.dump), tc.mode, netip.MustParseAddrPort("10.96.1.1:80"))
		if err != nil || got != tc.want {
			t.Errorf("%s: locate = %q, %v; want %q", tc.name, got, err, tc.want)
		}
	}
	if _, err := locate([]byte(kubeProxyIPT), "iptables", netip.MustParseAddrPort("10.96.9.9:80")); err == nil {
		t.Error("locate of an absent service: no error")
	}
}

func TestDescribe(t *testing.T) {
	rules := []*gnft.Rule{{Exprs: []expr.Any{
		&expr.Cmp{Data: []byte{10, 96, 1, 1}},
		&expr.Numgen{Modulus: 65536},
		&expr.Lookup{SetName: "endpoints-tcp-05"},
	}}, {Exprs: []expr.Any{
		&expr.Lookup{SetName: "__map3"},
		&expr.Verdict{Kind: expr.VerdictJump, Chain: "mark-for-masquerade"},
	}}}
	elems := map[string][]gnft.SetElement{
		"endpoints-tcp-05": {{Key: []byte{0, 0, 0, 0}, Val: []byte{10, 245, 0, 1, 0x1f, 0x90, 0, 0}}},
		"__map3":           {{Key: []byte{0, 0, 0, 1}, VerdictData: &expr.Verdict{Kind: expr.VerdictGoto, Chain: "endpoint-X__10.245.0.2/8080"}}},
	}
	if got, want := lookedUp(rules), []string{"__map3", "endpoints-tcp-05"}; !cmp.Equal(got, want) {
		t.Errorf("lookedUp = %q, want %q", got, want)
	}
	d := describe(rules, elems)
	for _, ip := range []string{"10.96.1.1", "10.245.0.1", "10.245.0.2"} {
		if !ruleread.HoldsAddr(d, netip.MustParseAddr(ip)) {
			t.Errorf("%s not found in:\n%s", ip, d)
		}
	}
	if ruleread.HoldsAddr(d, netip.MustParseAddr("10.245.0.11")) {
		t.Errorf("10.245.0.11 found in:\n%s", d)
	}
}

// TestTimedOutRunsLeaveTheFigures: a run whose first sync timed out is
// counted and named, never averaged in, and a proxy with no measured run
// gets no ratio.
func TestTimedOutRunsLeaveTheFigures(t *testing.T) {
	ok := Record{Run: 2, Services: 10, Proxy: ProxyKubeProxy, Mode: "nftables", FirstSyncSeconds: 3, Changes: []Change{{Seconds: 1}}}
	ok.summarize()
	recs := []Record{
		{Run: 1, Services: 10, Proxy: ProxyKubeProxy, Mode: "nftables", Error: "first sync timed out: not within 5m0s"},
		ok,
		{Run: 1, Services: 10, Proxy: ProxyKubeProxy, Mode: "iptables", Error: "first sync timed out: not within 5m0s"},
		{Run: 2, Services: 10, Proxy: ProxyKubeProxy, Mode: "iptables", Error: "skipped: the first sync timed out in run 1"},
		{Run: 1, Services: 10, Proxy: ProxySwitchyard, Mode: "nftables", FirstSyncSeconds: 1, Changes: []Change{{Seconds: 0.1}}},
	}
	sums := summarizeRuns(recs)
	if s := sums[0]; s.Runs != 1 || s.Failed != 1 || s.FirstSyncMinSeconds != 3 || s.ChangeMedianSeconds != 1 {
		t.Errorf("nftables summary %+v, want the one measured run only", s)
	}
	if s := sums[1]; s.Runs != 0 || s.Failed != 2 || !strings.Contains(s.Error, "timed out") {
		t.Errorf("iptables summary %+v", s)
	}
	for _, r := range computeRatios(sums) {
		if r.Baseline == "kube-proxy/iptables" {
			t.Errorf("ratio against a proxy with no measured run: %+v", r)
		}
	}
	var b strings.Builder
	if err := (&Report{Records: recs, Summaries: sums}).WriteMarkdown(&b); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(b.String(), "| 10 | kube-proxy/iptables | 0 of 2 | first sync timed out") {
		t.Errorf("markdown:\n%s", b.String())
	}
}
