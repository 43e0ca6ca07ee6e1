package apiserver

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestCheckBinaries(t *testing.T) {
	dir := t.TempDir()
	if err := checkBinaries(dir); !IsNotBuilt(err) {
		t.Fatalf("empty dir: %v, want ErrNotBuilt", err)
	}
	write := func(name string, mode os.FileMode) {
		t.Helper()
		if err := os.WriteFile(filepath.Join(dir, name), []byte("#!/bin/sh\n"), mode); err != nil {
			t.Fatal(err)
		}
	}
	write(etcdBinary, 0o755)
	write(apiserverBinary, 0o644)
	if err := checkBinaries(dir); !IsNotBuilt(err) {
		t.Fatalf("non-executable kube-apiserver: %v, want ErrNotBuilt", err)
	}
	if err := os.Chmod(filepath.Join(dir, apiserverBinary), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := checkBinaries(dir); err != nil {
		t.Fatalf("both present: %v", err)
	}
}

// recorder is a skipper that records instead of stopping the goroutine.
type recorder struct{ calls []string }

func (r *recorder) Helper() {}
func (r *recorder) Skipf(f string, args ...any) {
	r.calls = append(r.calls, "skip: "+fmt.Sprintf(f, args...))
}
func (r *recorder) Fatalf(f string, args ...any) {
	r.calls = append(r.calls, "fatal: "+fmt.Sprintf(f, args...))
}

func TestRequireWith(t *testing.T) {
	notBuilt := fmt.Errorf("%w: etcd missing in /x", ErrNotBuilt)
	broken := fmt.Errorf("parse hack/versions.env: bad line")
	tests := []struct {
		name string
		err  error
		ci   string
		want []string
	}{
		{"available", nil, "", nil},
		{"available in CI", nil, "true", nil},
		{"missing locally skips", notBuilt, "", []string{
			"skip: test bed binaries not built: etcd missing in /x; run `make deps` to build etcd/kube-apiserver (~15 min cold)"}},
		{"missing in CI fails", notBuilt, "1", []string{
			"fatal: test bed binaries not built: etcd missing in /x; CI=\"1\" is set, so not skipping; run `make deps` to build etcd/kube-apiserver (~15 min cold)"}},
		{"broken setup always fails", broken, "", []string{"fatal: parse hack/versions.env: bad line"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var r recorder
			requireWith(&r, tt.err, tt.ci)
			if diff := cmp.Diff(tt.want, r.calls); diff != "" {
				t.Errorf("requireWith (-want +got):\n%s", diff)
			}
		})
	}
}
