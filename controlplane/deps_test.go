package controlplane_test

import (
	"os/exec"
	"strings"
	"testing"
)

// TestDataplaneOnlyPure enforces that the control plane reads views the
// way the agents do (dataplane/explain over dataplane/serviceport) without
// linking any kernel mode: of the dataplane module it may depend only on
// the packages that do no I/O (dataplane/maglev: the tables it computes
// for every node).
func TestDataplaneOnlyPure(t *testing.T) {
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Skipf("go tool not found: %v", err)
	}
	out, err := exec.CommandContext(t.Context(), goBin, "list", "-deps", "./...").CombinedOutput()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, out)
	}
	const dp = "github.com/switchyard-proxy/switchyard/dataplane"
	allowed := map[string]bool{dp: true, dp + "/explain": true, dp + "/serviceport": true, dp + "/conntrack": true, dp + "/maglev": true}
	seen := false
	for _, p := range strings.Fields(string(out)) {
		if p != dp && !strings.HasPrefix(p, dp+"/") {
			continue
		}
		seen = seen || p == dp+"/explain"
		if !allowed[p] {
			t.Errorf("the control plane depends on %s; only dataplane, dataplane/explain, dataplane/serviceport, dataplane/conntrack and dataplane/maglev are allowed", p)
		}
	}
	if !seen {
		t.Errorf("the control plane no longer depends on dataplane/explain: is this test still needed?\n%s", out)
	}
}
