package apiserver

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestBinDirFor(t *testing.T) {
	v := Versions{Kubernetes: "v1.37.2", Etcd: "v3.6.16"}
	const key = "testbed/k8s-v1.37.2_etcd-v3.6.16/bin"
	tests := []struct {
		name    string
		env     map[string]string
		want    string
		wantErr bool
	}{
		{"HOME only", map[string]string{"HOME": "/home/u"}, "/home/u/.cache/switchyard/" + key, false},
		{"XDG wins over HOME", map[string]string{"HOME": "/home/u", "XDG_CACHE_HOME": "/xdg"}, "/xdg/switchyard/" + key, false},
		{"cache dir wins over XDG", map[string]string{"HOME": "/home/u", "XDG_CACHE_HOME": "/xdg", "SWITCHYARD_CACHE_DIR": "/c"}, "/c/" + key, false},
		{"empty counts as unset", map[string]string{"HOME": "/home/u", "XDG_CACHE_HOME": "", "SWITCHYARD_CACHE_DIR": ""}, "/home/u/.cache/switchyard/" + key, false},
		{"bin override wins", map[string]string{"SWITCHYARD_CACHE_DIR": "/c", "SWITCHYARD_TESTBED_BIN": "/opt/bin"}, "/opt/bin", false},
		{"nothing set", map[string]string{}, "", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := binDirFor(func(k string) string { return tt.env[k] }, v)
			if (err != nil) != tt.wantErr {
				t.Fatalf("binDirFor error = %v, wantErr %v", err, tt.wantErr)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("binDirFor (-want +got):\n%s", diff)
			}
		})
	}
}

func TestParseVersions(t *testing.T) {
	tests := []struct {
		name    string
		in      string
		want    Versions
		wantErr bool
	}{
		{
			name: "comments and blanks",
			in:   "# pinned\n\nK8S_VERSION=v1.37.2\nETCD_VERSION=v3.6.16\n",
			want: Versions{Kubernetes: "v1.37.2", Etcd: "v3.6.16"},
		},
		{
			name: "quotes, export and spaces",
			in:   "export K8S_VERSION=\"v1.37.2\"\n  ETCD_VERSION = 'v3.6.16'  \nOTHER=x\n",
			want: Versions{Kubernetes: "v1.37.2", Etcd: "v3.6.16"},
		},
		{name: "missing etcd", in: "K8S_VERSION=v1.37.2\n", wantErr: true},
		{name: "not key=value", in: "K8S_VERSION v1.37.2\n", wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := parseVersions(strings.NewReader(tt.in))
			if (err != nil) != tt.wantErr {
				t.Fatalf("parseVersions error = %v, wantErr %v", err, tt.wantErr)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("parseVersions (-want +got):\n%s", diff)
			}
		})
	}
}

func TestFindRepoRoot(t *testing.T) {
	root := t.TempDir()
	deep := filepath.Join(root, "e2e", "testbed", "apiserver")
	if err := os.MkdirAll(deep, 0o755); err != nil {
		t.Fatal(err)
	}
	if _, err := findRepoRoot(deep); err == nil {
		t.Fatal("findRepoRoot without go.work succeeded")
	}
	if err := os.WriteFile(filepath.Join(root, "go.work"), []byte("go 1.26\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, start := range []string{root, deep} {
		got, err := findRepoRoot(start)
		if err != nil {
			t.Fatalf("findRepoRoot(%s): %v", start, err)
		}
		if got != root {
			t.Errorf("findRepoRoot(%s) = %s, want %s", start, got, root)
		}
	}
}

// TestBinDirMatchesScript compares BinDir with what `hack/testbed-build.sh
// bindir` prints under the same environment.
func TestBinDirMatchesScript(t *testing.T) {
	root, err := RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	script := filepath.Join(root, "hack", "testbed-build.sh")
	if _, err := os.Stat(script); err != nil {
		t.Skipf("no build script: %v", err)
	}
	bash, err := exec.LookPath("bash")
	if err != nil {
		t.Skip("no bash")
	}
	envs := []map[string]string{
		{"HOME": "/home/u"},
		{"HOME": "/home/u", "XDG_CACHE_HOME": "/xdg"},
		{"HOME": "/home/u", "XDG_CACHE_HOME": "/xdg", "SWITCHYARD_CACHE_DIR": "/cache"},
	}
	for _, env := range envs {
		t.Run(fmt.Sprint(env), func(t *testing.T) {
			for _, k := range []string{"HOME", "XDG_CACHE_HOME", "SWITCHYARD_CACHE_DIR", EnvBinDir} {
				t.Setenv(k, env[k])
			}
			out, err := exec.CommandContext(t.Context(), bash, script, "bindir").Output()
			if err != nil {
				t.Fatalf("%s bindir: %v", script, err)
			}
			got, err := BinDir()
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(strings.TrimSpace(string(out)), got); diff != "" {
				t.Errorf("BinDir differs from the script (-script +BinDir):\n%s", diff)
			}
		})
	}
}
