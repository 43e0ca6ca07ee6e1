package ipvs

import (
	"errors"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/switchyard-proxy/switchyard/e2e/compare"
)

const (
	// handOverEnv opts in to TestIPVSHandOverInGuest (make
	// ipvs-handover): tens of minutes under TCG.
	handOverEnv = "SWITCHYARD_GUEST_HANDOVER"
	// handOverTest is e2e/system's test of the hand-over; maxHandOverTime
	// bounds the guest's run of it.
	handOverTest    = "TestIPVSHandOver"
	maxHandOverTime = 45 * time.Minute
	// handOverRunEnv, when set, is a -test.run pattern for the
	// transitions: KubeProxy… runs alone, a mode switch expects the
	// switches before it (the cluster starts in ipvs).
	handOverRunEnv = "SWITCHYARD_GUEST_TRANSITIONS"
)

// TestIPVSHandOverInGuest runs e2e/system's TestIPVSHandOver inside the
// QEMU guest, whose kernel has IPVS: Switchyard's ipvs mode switched to
// nftables and iptables and back under traffic, then upstream
// kube-proxy's ipvs mode (the test bed's binary, added to the guest)
// replaced by Switchyard. Each transition is reported as a subtest with
// the guest's output, and the results table the guest logged is logged
// here. Opt-in (SWITCHYARD_GUEST_HANDOVER=1, make ipvs-handover).
func TestIPVSHandOverInGuest(t *testing.T) {
	if os.Getenv(handOverEnv) == "" {
		t.Skipf("opt-in, tens of minutes under TCG: %s=1 (make ipvs-handover)", handOverEnv)
	}
	if _, err := compare.KubeProxyPath(); errors.Is(err, compare.ErrNoKubeProxy) {
		skipOrFail(t, "%v; %s", err, compare.KubeProxyHint)
	} else if err != nil {
		t.Fatal(err)
	}
	res, rep, top := runSystemTest(t, handOverTest, handOverRunEnv, maxHandOverTime, "kube-proxy")
	reportRows(t, parseRows(handOverTest, top.Output), rep.Exit)
	t.Logf("%s %s in the guest after %s (the guest ran %v); its results:\n%s", handOverTest, top.Status, top.Elapsed,
		res.Elapsed.Round(time.Second), resultsTable(top.Output))
	if top.Status != "PASS" {
		t.Errorf("%s %s; its last lines:\n%s", handOverTest, top.Status, tail(strings.Join(top.Output, "\n"), 40))
	}
}

// resultsTable picks the Markdown table TestIPVSHandOver logs out of its
// output: its lines start with "|" once the log prefix is trimmed.
func resultsTable(output []string) string {
	var b strings.Builder
	for _, line := range output {
		if l := strings.TrimSpace(line); strings.HasPrefix(l, "|") {
			b.WriteString(l + "\n")
		}
	}
	if b.Len() == 0 {
		return "(no results table: the test stopped before the end)"
	}
	return b.String()
}
