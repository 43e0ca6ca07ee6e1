package compare

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/switchyard-proxy/switchyard/e2e/testbed/apiserver"
	"github.com/switchyard-proxy/switchyard/e2e/testbed/netns"
)

// TestCompareSmoke runs the whole harness on 10 services: both kube-proxy
// modes and Switchyard must sync, program changes and report memory. It
// needs root and the test bed (skips locally without them, fails in CI as
// every e2e test does), and skips without the kube-proxy binary, which
// only `BUILD_KUBE_PROXY=1 hack/testbed-build.sh` builds.
func TestCompareSmoke(t *testing.T) {
	requireBed(t)
	rep := runSmoke(t, Config{
		Sizes: []int{10}, Changes: 2,
		// Three runs keep it short and still cover every dumper: upstream's
		// nftables table, and both of the agent's modes.
		KubeProxyModes: []string{"nftables"}, SwitchyardModes: []string{"iptables", "nftables"},
		MinSyncPeriod: 100 * time.Millisecond, ChangeGap: 300 * time.Millisecond,
		CoalesceWindow: 20 * time.Millisecond,
	})
	if len(rep.Records) != 3 {
		t.Fatalf("got %d records, want kube-proxy nftables + switchyard iptables + nftables", len(rep.Records))
	}
	for _, r := range rep.Records {
		checkSane(t, r)
	}
	if len(rep.Summaries) != 3 || rep.Summaries[0].Runs != 1 {
		t.Errorf("summaries %+v, want one per record", rep.Summaries)
	}
	if len(rep.Ratios) == 0 {
		t.Error("no ratios")
	}
	for _, r := range rep.Ratios {
		if r.Baseline == "" || r.Candidate == "" {
			t.Errorf("ratio without both sides named: %+v", r)
		}
	}
	var js bytes.Buffer
	if err := rep.WriteJSON(&js); err != nil {
		t.Fatal(err)
	}
	var back Report
	if err := json.Unmarshal(js.Bytes(), &back); err != nil || len(back.Records) != 3 {
		t.Errorf("JSON round trip: %v, %d records", err, len(back.Records))
	}
}

// requireBed skips (fails in CI) without root or the test bed, and skips
// without the upstream kube-proxy binary.
func requireBed(t *testing.T) {
	t.Helper()
	netns.RequireRoot(t)
	apiserver.Require(t)
	if _, err := KubeProxyPath(); errors.Is(err, ErrNoKubeProxy) {
		t.Skipf("%v; %s", err, KubeProxyHint)
	} else if err != nil {
		t.Fatal(err)
	}
}

// runSmoke runs cfg within three minutes, logging through t, and logs
// the time it took and the markdown report.
func runSmoke(t *testing.T, cfg Config) *Report {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()
	cfg.Logger = netns.TestLogger(t)
	start := time.Now()
	rep, err := Run(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("harness took %v", time.Since(start).Round(time.Millisecond))
	var md bytes.Buffer
	if err := rep.WriteMarkdown(&md); err != nil {
		t.Fatal(err)
	}
	t.Log("\n" + md.String())
	return rep
}

func checkSane(t *testing.T, r Record) {
	t.Helper()
	name := r.Name()
	if r.FirstSyncSeconds <= 0 || r.FirstSyncSeconds > 120 {
		t.Errorf("%s: first sync %v s", name, r.FirstSyncSeconds)
	}
	if len(r.Changes) != 2 {
		t.Errorf("%s: %d changes, want 2", name, len(r.Changes))
	}
	for _, c := range r.Changes {
		if c.Seconds <= 0 || c.Seconds > 60 {
			t.Errorf("%s: change %+v", name, c)
		}
	}
	if r.ChangeMinSeconds <= 0 || r.ChangeMedianSeconds < r.ChangeMinSeconds {
		t.Errorf("%s: change min %v median %v", name, r.ChangeMinSeconds, r.ChangeMedianSeconds)
	}
	if r.RSSBytes < 1<<20 || r.HWMBytes < r.RSSBytes {
		t.Errorf("%s: RSS %d, peak %d", name, r.RSSBytes, r.HWMBytes)
	}
	if r.PollMedianSeconds <= 0 || r.ReadMedianSeconds <= 0 {
		t.Errorf("%s: dump cost %v, read cost %v", name, r.PollMedianSeconds, r.ReadMedianSeconds)
	}
	// The metric is read after the dump and moves with any later sync, so
	// it is only checked to be there.
	if r.FirstSyncMetricSeconds <= 0 {
		t.Errorf("%s: no first sync by the proxy's own metric (dump: %v s)", name, r.FirstSyncSeconds)
	}
	if r.Proxy == ProxySwitchyard && (r.ControlPlaneRSSBytes < 1<<20 || r.AgentSyncSeconds <= 0) {
		t.Errorf("%s: control plane RSS %d, agent sync %v", name, r.ControlPlaneRSSBytes, r.AgentSyncSeconds)
	}
	if r.Mode == "iptables" && !strings.Contains(r.IptablesFlavour, "iptables") {
		t.Errorf("%s: iptables flavour %q", name, r.IptablesFlavour)
	}
}
