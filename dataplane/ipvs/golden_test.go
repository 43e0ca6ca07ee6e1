package ipvs_test

import (
	"flag"
	"fmt"
	"strings"
	"testing"

	"github.com/switchyard-proxy/switchyard/dataplane"
	"github.com/switchyard-proxy/switchyard/dataplane/dataplanetest"
	"github.com/switchyard-proxy/switchyard/dataplane/ipvs"
	"github.com/switchyard-proxy/switchyard/dataplane/ipvs/ipvstest"
)

var update = flag.Bool("update", false, "rewrite testdata/*/want.txt")

// applyGolden applies a state to a fresh fake and returns the fake's
// dump followed by the skips logged. It also checks that the same state
// again changes nothing, whether diffed against the last Apply or
// against a kernel read-back, and that the case made ipsets.
func applyGolden(t *testing.T, st *dataplane.State) string {
	t.Helper()
	f := ipvstest.New()
	logs := &logBuffer{}
	dp := newDataplane(t, f, ipvs.Config{Families: dataplanetest.Families(st), Logger: logs.logger()})
	if err := dp.Apply(t.Context(), st, dataplane.ApplyOptions{}); err != nil {
		t.Fatalf("Apply: %v", err)
	}
	var b strings.Builder
	b.WriteString(f.Dump())
	for _, l := range logs.lines("skipped input") {
		fmt.Fprintf(&b, "# %s\n", l)
	}
	got := b.String()

	for _, full := range []bool{false, true} {
		f.ResetCalls()
		if err := dp.Apply(t.Context(), st, dataplane.ApplyOptions{Full: full}); err != nil {
			t.Fatalf("second Apply (full=%v): %v", full, err)
		}
		if m := f.MutatingCalls(); len(m) > 0 {
			t.Errorf("second Apply (full=%v) changed the kernel:\n%s", full, strings.Join(m, "\n"))
		}
	}
	if !strings.Contains(got, "ipset") {
		t.Error("no ipsets")
	}
	return got
}

func TestApplyGolden(t *testing.T) {
	dataplanetest.RunGolden(t, "testdata", "want.txt", *update, applyGolden)
}
