package dataplanetest

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/switchyard-proxy/switchyard/dataplane"
)

// RunGolden is every mode's golden test, so that they all choose cases,
// render and rewrite the same way. For each case with a golden file
// dir/<case>/file (see Cases) it runs a subtest named for the case that
// renders the case's input (LoadState) twice with render, a fresh copy
// each time, fails if the two outputs differ (a golden of output that
// changes from run to run proves nothing), and hands the output to
// Golden with update, the mode's -update flag.
//
// render is the mode's output for one state as text; it may make
// further assertions through t (it runs twice, so they run twice).
func RunGolden(t *testing.T, dir, file string, update bool, render func(t *testing.T, st *dataplane.State) string) {
	t.Helper()
	for _, name := range Cases(t, filepath.Join(dir, "*", file)) {
		t.Run(name, func(t *testing.T) {
			got := render(t, LoadState(t, name))
			if again := render(t, LoadState(t, name)); again != got {
				t.Fatal("output is not deterministic: two renderings of the same input differ")
			}
			Golden(t, filepath.Join(dir, name, file), got, update)
		})
	}
}

// Families are the families a golden case is rendered in: IPv4, and
// IPv6 as well when a service has an IPv6 cluster IP. Every mode asks
// the same question so their goldens cover the same families.
func Families(st *dataplane.State) []dataplane.Family {
	for _, sv := range st.Services {
		for _, ip := range sv.GetClusterIps() {
			if strings.Contains(ip, ":") {
				return []dataplane.Family{dataplane.IPv4, dataplane.IPv6}
			}
		}
	}
	return []dataplane.Family{dataplane.IPv4}
}

// WriteSkips writes skips as golden lines, "# skip <service>: <reason>"
// each, the form the goldens of the rendering modes share.
func WriteSkips(w io.Writer, skips []dataplane.Skip) {
	for _, s := range skips {
		fmt.Fprintf(w, "# skip %q: %s\n", s.Service, s.Reason)
	}
}

// Cases returns the cases a mode has goldens for, sorted: the <case> of
// every file matching goldens, a pattern such as "testdata/*/want.rules".
// A mode's goldens, not the list of views, say which cases it runs, so
// a view added for one mode leaves the others as they are; to run a case
// in a mode, create its empty golden file and run the mode's tests with
// -update. Cases fails the test when no golden matches or one has no
// view (a case renamed or removed in one place only).
func Cases(t testing.TB, goldens string) []string {
	t.Helper()
	files, err := filepath.Glob(goldens)
	if err != nil || len(files) == 0 {
		t.Fatalf("no golden files match %s: %v", goldens, err)
	}
	all := Views()
	names := make([]string, 0, len(files))
	for _, f := range files {
		name := filepath.Base(filepath.Dir(f))
		if !slices.Contains(all, name) {
			t.Fatalf("golden %s: no view %q in dataplanetest/views", f, name)
		}
		names = append(names, name)
	}
	// By name, not by path: "nodeport" before "nodeport-addresses".
	slices.Sort(names)
	return names
}

// Golden compares got with the file at path or, with update (each mode's
// -update flag), writes got there. Every mode's golden test ends here, so
// they all rewrite and report the same way.
func Golden(t testing.TB, path, got string, update bool) {
	t.Helper()
	if update {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run with -update)", err)
	}
	if d := cmp.Diff(string(want), got); d != "" {
		t.Errorf("%s differs (-want +got):\n%s", path, d)
	}
}
