package apiserver

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

// ErrNotBuilt reports that the test bed binaries are not in the cache.
var ErrNotBuilt = errors.New("test bed binaries not built")

// IsNotBuilt reports whether err says the binaries are missing, as opposed
// to a broken setup (unreadable versions file, wrong OS, ...).
func IsNotBuilt(err error) bool { return errors.Is(err, ErrNotBuilt) }

// buildHint is what a developer should do when the binaries are missing.
const buildHint = "run `make deps` to build etcd/kube-apiserver (~15 min cold)"

// Binaries the server needs, relative to BinDir.
const (
	etcdBinary      = "etcd"
	apiserverBinary = "kube-apiserver"
)

// Available returns nil when etcd and kube-apiserver are present and
// executable, an error wrapping ErrNotBuilt when either is missing, and any
// other error when the lookup itself failed.
func Available() error {
	if runtime.GOOS != "linux" {
		return fmt.Errorf("test bed API server: needs linux, running on %s", runtime.GOOS)
	}
	dir, err := BinDir()
	if err != nil {
		return fmt.Errorf("test bed API server: %w", err)
	}
	return checkBinaries(dir)
}

func checkBinaries(dir string) error {
	var missing []string
	for _, name := range []string{etcdBinary, apiserverBinary} {
		fi, err := os.Stat(filepath.Join(dir, name))
		switch {
		case errors.Is(err, os.ErrNotExist):
			missing = append(missing, name)
		case err != nil:
			return fmt.Errorf("test bed API server: %w", err)
		case fi.IsDir() || fi.Mode().Perm()&0o111 == 0:
			missing = append(missing, name+" (not executable)")
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("%w: %s missing in %s", ErrNotBuilt, strings.Join(missing, ", "), dir)
	}
	return nil
}

// Require skips t when the binaries are not built, unless the CI environment
// variable is set (to anything), in which case it fails t: CI must build
// them. Any other lookup error always fails t.
func Require(t testing.TB) {
	t.Helper()
	requireWith(t, Available(), os.Getenv("CI"))
}

// skipper is the part of testing.TB that requireWith uses.
type skipper interface {
	Helper()
	Skipf(format string, args ...any)
	Fatalf(format string, args ...any)
}

func requireWith(t skipper, availErr error, ci string) {
	t.Helper()
	switch {
	case availErr == nil:
	case IsNotBuilt(availErr) && ci == "":
		t.Skipf("%v; %s", availErr, buildHint)
	case IsNotBuilt(availErr):
		t.Fatalf("%v; CI=%q is set, so not skipping; %s", availErr, ci, buildHint)
	default:
		t.Fatalf("%v", availErr)
	}
}
