package apiserver

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
)

// Environment variables that steer where the binaries are looked up. They
// mirror hack/testbed-build.sh; EnvBinDir is ours alone and wins over all.
const (
	EnvBinDir   = "SWITCHYARD_TESTBED_BIN"
	EnvCacheDir = "SWITCHYARD_CACHE_DIR"
	envXDGCache = "XDG_CACHE_HOME"
	envHome     = "HOME"
)

// versionsFile is the pinned-versions file, relative to the repository root.
const versionsFile = "hack/versions.env"

// Versions are the component versions pinned in hack/versions.env.
type Versions struct {
	Kubernetes string // K8S_VERSION, e.g. v1.37.2
	Etcd       string // ETCD_VERSION, e.g. v3.6.16
}

// BinDir returns the directory holding etcd, kube-apiserver and kubectl, the
// same directory `hack/testbed-build.sh bindir` prints. SWITCHYARD_TESTBED_BIN
// overrides the lookup entirely.
func BinDir() (string, error) {
	if dir := os.Getenv(EnvBinDir); dir != "" {
		return dir, nil
	}
	root, err := RepoRoot()
	if err != nil {
		return "", err
	}
	v, err := readVersions(root)
	if err != nil {
		return "", err
	}
	return binDirFor(os.Getenv, v)
}

// PinnedVersions reads hack/versions.env of the enclosing repository.
func PinnedVersions() (Versions, error) {
	root, err := RepoRoot()
	if err != nil {
		return Versions{}, err
	}
	return readVersions(root)
}

// RepoRoot walks up from the working directory to the first directory that
// holds a go.work file.
func RepoRoot() (string, error) {
	wd, err := os.Getwd()
	if err != nil {
		return "", fmt.Errorf("find repository root: %w", err)
	}
	return findRepoRoot(wd)
}

func findRepoRoot(start string) (string, error) {
	dir := filepath.Clean(start)
	for {
		_, err := os.Stat(filepath.Join(dir, "go.work"))
		if err == nil {
			return dir, nil
		}
		if !errors.Is(err, os.ErrNotExist) {
			return "", fmt.Errorf("find repository root: %w", err)
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", fmt.Errorf("find repository root: no go.work in %s or any parent", start)
		}
		dir = parent
	}
}

// binDirFor computes the cache path exactly as hack/testbed-build.sh:
//
//	${SWITCHYARD_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/switchyard}/testbed/k8s-<K8S>_etcd-<ETCD>/bin
//
// Like the shell's ":-", an empty variable counts as unset.
func binDirFor(getenv func(string) string, v Versions) (string, error) {
	if dir := getenv(EnvBinDir); dir != "" {
		return dir, nil
	}
	cache := getenv(EnvCacheDir)
	if cache == "" {
		base := getenv(envXDGCache)
		if base == "" {
			home := getenv(envHome)
			if home == "" {
				return "", fmt.Errorf("locate testbed cache: none of %s, %s, %s is set", EnvCacheDir, envXDGCache, envHome)
			}
			base = filepath.Join(home, ".cache")
		}
		cache = filepath.Join(base, "switchyard")
	}
	key := fmt.Sprintf("k8s-%s_etcd-%s", v.Kubernetes, v.Etcd)
	return filepath.Join(cache, "testbed", key, "bin"), nil
}

func readVersions(root string) (Versions, error) {
	vars, err := PinnedVars(root)
	if err != nil {
		return Versions{}, err
	}
	return versionsOf(vars)
}

// PinnedVars reads every KEY=VALUE of hack/versions.env below root, the one
// reader of that file for the whole test bed (images, cluster, e2e.test).
func PinnedVars(root string) (map[string]string, error) {
	path := filepath.Join(root, versionsFile)
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("read pinned versions: %w", err)
	}
	defer f.Close()
	vars, err := parseVars(f)
	if err != nil {
		return nil, fmt.Errorf("parse %s: %w", path, err)
	}
	return vars, nil
}

// parseVars reads KEY=VALUE lines; blank lines and # comments are
// skipped, an optional "export " prefix and matching quotes are dropped.
func parseVars(r io.Reader) (map[string]string, error) {
	vars := map[string]string{}
	sc := bufio.NewScanner(r)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		line = strings.TrimPrefix(line, "export ")
		key, val, ok := strings.Cut(line, "=")
		if !ok {
			return nil, fmt.Errorf("line %d: want KEY=VALUE, got %q", n, line)
		}
		vars[strings.TrimSpace(key)] = unquote(strings.TrimSpace(val))
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	return vars, nil
}

// parseVersions is parseVars for the two versions the API server bed needs.
func parseVersions(r io.Reader) (Versions, error) {
	vars, err := parseVars(r)
	if err != nil {
		return Versions{}, err
	}
	return versionsOf(vars)
}

func versionsOf(vars map[string]string) (Versions, error) {
	v := Versions{Kubernetes: vars["K8S_VERSION"], Etcd: vars["ETCD_VERSION"]}
	if v.Kubernetes == "" || v.Etcd == "" {
		return Versions{}, errors.New("K8S_VERSION and ETCD_VERSION must both be set")
	}
	return v, nil
}

func unquote(s string) string {
	if len(s) >= 2 && (s[0] == '"' || s[0] == '\'') && s[len(s)-1] == s[0] {
		return s[1 : len(s)-1]
	}
	return s
}
