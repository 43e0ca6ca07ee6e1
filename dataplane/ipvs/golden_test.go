package ipvs_test

import (
	"flag"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/switchyard-proxy/switchyard/dataplane"
	"github.com/switchyard-proxy/switchyard/dataplane/dataplanetest"
	"github.com/switchyard-proxy/switchyard/dataplane/ipvs"
	"github.com/switchyard-proxy/switchyard/dataplane/ipvs/ipvstest"
)

var update = flag.Bool("update", false, "rewrite testdata/*/want.txt")

// families is IPv4, plus IPv6 when a service has an IPv6 cluster IP, as
// in the iptables golden tests.
func families(st *dataplane.State) []dataplane.Family {
	for _, sv := range st.Services {
		for _, ip := range sv.GetClusterIps() {
			if strings.Contains(ip, ":") {
				return []dataplane.Family{dataplane.IPv4, dataplane.IPv6}
			}
		}
	}
	return []dataplane.Family{dataplane.IPv4}
}

// applyCase applies a case to a fresh fake and returns the fake's dump
// followed by the skips logged.
func applyCase(t *testing.T, name string) (string, *ipvstest.Fake, *ipvs.Dataplane, *dataplane.State) {
	t.Helper()
	st := dataplanetest.LoadState(t, name)
	f := ipvstest.New()
	logs := &logBuffer{}
	dp := newDataplane(t, f, ipvs.Config{Families: families(st), Logger: logs.logger()})
	if err := dp.Apply(t.Context(), st, dataplane.ApplyOptions{}); err != nil {
		t.Fatalf("Apply: %v", err)
	}
	var b strings.Builder
	b.WriteString(f.Dump())
	for _, l := range logs.lines("skipped input") {
		fmt.Fprintf(&b, "# %s\n", l)
	}
	return b.String(), f, dp, st
}

func TestApplyGolden(t *testing.T) {
	for _, name := range dataplanetest.Cases(t, "testdata/*/want.txt") {
		t.Run(name, func(t *testing.T) {
			got, f, dp, st := applyCase(t, name)
			if again, _, _, _ := applyCase(t, name); again != got {
				t.Fatal("apply is not deterministic")
			}
			dataplanetest.Golden(t, filepath.Join("testdata", name, "want.txt"), got, *update)

			// The same state again changes nothing, whether diffed
			// against the last Apply or against a kernel read-back.
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
		})
	}
}
