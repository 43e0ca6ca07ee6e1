package checkout

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/switchyard-proxy/switchyard/e2e/testbed/apiserver"
	"github.com/switchyard-proxy/switchyard/e2e/testbed/readme"
)

// Examples reads the marked examples of the repository's README.md
// (readme.Read).
func Examples(t testing.TB) map[string]readme.Example {
	t.Helper()
	examples, err := readme.Read(filepath.Join(root(t), "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	return examples
}

// Grpcurl is the grpcurl that `make tools` installs into bin/.
func Grpcurl(t testing.TB) string {
	t.Helper()
	p := filepath.Join(root(t), "bin", "grpcurl")
	if _, err := os.Stat(p); err != nil {
		Missing(t, fmt.Sprintf("grpcurl missing at %s: run `make tools`", p))
	}
	return p
}

// Missing skips t for a missing tool, why saying which and how to get
// it, or fails it under CI.
func Missing(t testing.TB, why string) {
	t.Helper()
	if os.Getenv("CI") != "" {
		t.Fatal(why)
	}
	t.Skip(why)
}

func root(t testing.TB) string {
	t.Helper()
	root, err := apiserver.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	return root
}
