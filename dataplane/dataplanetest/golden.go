package dataplanetest

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// Cases returns the golden case directories matching pattern (for
// example "testdata/*"), failing the test when there is none.
func Cases(t testing.TB, pattern string) []string {
	t.Helper()
	dirs, err := filepath.Glob(pattern)
	if err != nil || len(dirs) == 0 {
		t.Fatalf("no golden cases match %s: %v", pattern, err)
	}
	return dirs
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
