package dataplanetest

import (
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"
)

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
