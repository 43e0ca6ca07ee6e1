package compare

import (
	"strings"
	"testing"
	"time"
)

func TestWriteChurn(t *testing.T) {
	var b strings.Builder
	writeChurn(&b, nil, []Record{{Churn: &ChurnResult{}}})
	if b.Len() != 0 {
		t.Fatalf("no churn configured, wrote %q", b.String())
	}
	recs := []Record{
		{Services: 1000, Run: 1, Proxy: ProxyKubeProxy, Mode: "nftables"}, // no churn measured: no row
		{Services: 1000, Run: 1, Proxy: ProxySwitchyard, Mode: "nftables",
			Churn: &ChurnResult{Changes: 1000, Seconds: 20.5, LastSeenSeconds: 0.012, CPUSeconds: 2.05, CPUMillisPerSecond: 100, Syncs: 410}},
	}
	writeChurn(&b, &Churn{Rate: 50, Duration: 20 * time.Second}, recs)
	out := b.String()
	for _, want := range []string{"50 EndpointSlice changes/s for 20s", "| 1000 | 1 | switchyard/nftables | 1000 |", "| 100 | 410 | 20.0 |"} {
		if !strings.Contains(out, want) {
			t.Errorf("churn table lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "kube-proxy/nftables") {
		t.Errorf("a record without churn has a row:\n%s", out)
	}
}
