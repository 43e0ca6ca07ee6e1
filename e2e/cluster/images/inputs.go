package images

import (
	"bytes"
	"context"
	"debug/elf"
	"encoding/json"
	"errors"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// NotBuiltError says a test-bed binary an image needs is missing.
type NotBuiltError struct {
	Binary string // "agnhost"
	Path   string // where it was looked for
}

func (e *NotBuiltError) Error() string {
	return fmt.Sprintf("%s not built: run hack/testbed-build.sh (no %s)", e.Binary, e.Path)
}

// IsNotBuilt reports whether err says a test-bed binary is missing.
func IsNotBuilt(err error) bool {
	var nb *NotBuiltError
	return errors.As(err, &nb)
}

// testbedBinary is the path of the test-bed binary name in binDir, or a
// *NotBuiltError.
func testbedBinary(binDir, name string) (string, error) {
	if binDir == "" {
		return "", &NotBuiltError{Binary: name, Path: "(Options.BinDir is empty)"}
	}
	p := filepath.Join(binDir, name)
	fi, err := os.Stat(p)
	if err != nil || !fi.Mode().IsRegular() {
		return "", &NotBuiltError{Binary: name, Path: p}
	}
	return p, nil
}

// goBuild builds the repository's main package pkg ("./nodeagent/cmd/x")
// into out as a static, stripped binary, stamping -X main.version=tag when
// the package declares a package-level version variable.
func goBuild(ctx context.Context, repoRoot, pkg, out, tag string) error {
	ldflags := "-s -w"
	has, err := hasVersionVar(filepath.Join(repoRoot, filepath.FromSlash(pkg)))
	if err != nil {
		return err
	}
	if has {
		ldflags += " -X main.version=" + tag
	}
	cmd := exec.CommandContext(ctx, "go", "build", "-trimpath", "-ldflags="+ldflags, "-o", out, pkg)
	cmd.Dir = repoRoot
	// The checkout's own workspace, whatever GOWORK the caller names: the
	// checkout may be another commit of this repository (an older release
	// built for the upgrade test), whose modules differ from the caller's.
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOWORK="+filepath.Join(repoRoot, "go.work"))
	if b, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("go build %s: %w\n%s", pkg, err, b)
	}
	return nil
}

// hasVersionVar reports whether the Go package in dir declares a
// package-level variable named version.
func hasVersionVar(dir string) (bool, error) {
	files, err := filepath.Glob(filepath.Join(dir, "*.go"))
	if err != nil {
		return false, err
	}
	fset := token.NewFileSet()
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		af, err := parser.ParseFile(fset, f, nil, parser.SkipObjectResolution)
		if err != nil {
			return false, fmt.Errorf("parsing %s: %w", f, err)
		}
		for _, d := range af.Decls {
			gd, ok := d.(*ast.GenDecl)
			if !ok || gd.Tok != token.VAR {
				continue
			}
			for _, s := range gd.Specs {
				for _, n := range s.(*ast.ValueSpec).Names {
					if n.Name == "version" {
						return true, nil
					}
				}
			}
		}
	}
	if len(files) == 0 {
		return false, fmt.Errorf("no Go files in %s", dir)
	}
	return false, nil
}

// moduleDir is the module cache directory of module@version, downloaded
// when absent. It runs outside any module or workspace.
func moduleDir(ctx context.Context, workDir, module, version string) (string, error) {
	cmd := exec.CommandContext(ctx, "go", "mod", "download", "-json", module+"@"+version)
	cmd.Dir = workDir
	cmd.Env = append(os.Environ(), "GOWORK=off", "GO111MODULE=on")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	var res struct{ Dir, Error string }
	if jerr := json.Unmarshal(out, &res); jerr == nil && res.Error != "" {
		return "", fmt.Errorf("go mod download %s@%s: %s", module, version, res.Error)
	}
	if err != nil {
		return "", fmt.Errorf("go mod download %s@%s: %w\n%s", module, version, err, stderr.Bytes())
	}
	if res.Dir == "" {
		return "", fmt.Errorf("go mod download %s@%s: no directory in %q", module, version, out)
	}
	return res.Dir, nil
}

// buildPause compiles Kubernetes' pause.c (build/pause/linux in the
// k8s.io/kubernetes module of k8sVersion) statically into out, with the
// flags of its Makefile.
func buildPause(ctx context.Context, workDir, k8sVersion, out string) error {
	dir, err := moduleDir(ctx, workDir, "k8s.io/kubernetes", k8sVersion)
	if err != nil {
		return fmt.Errorf("pause source: %w", err)
	}
	src := filepath.Join(dir, "build", "pause", "linux", "pause.c")
	cmd := exec.CommandContext(ctx, "gcc", "-Os", "-Wall", "-Werror", "-static", "-s",
		"-DVERSION=v"+PauseVersion+"-switchyard", "-o", out, src)
	cmd.Dir = workDir
	if b, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("gcc %s: %w\n%s", src, err, b)
	}
	return nil
}

// checkStatic fails unless p is an ELF executable without an interpreter
// (statically linked), so it runs in an image with no libc.
func checkStatic(p string) error {
	f, err := elf.Open(p)
	if err != nil {
		return fmt.Errorf("%s: %w", p, err)
	}
	defer f.Close()
	for _, prog := range f.Progs {
		if prog.Type == elf.PT_INTERP {
			return fmt.Errorf("%s is dynamically linked; need a static binary", p)
		}
	}
	return nil
}

// busyboxApplets asks the busybox binary for its applets.
func busyboxApplets(ctx context.Context, busybox string) ([]string, error) {
	out, err := exec.CommandContext(ctx, busybox, "--list").Output()
	if err != nil {
		return nil, fmt.Errorf("%s --list: %w", busybox, err)
	}
	var applets []string
	for _, a := range strings.Fields(string(out)) {
		if a != "busybox" && !strings.Contains(a, "/") {
			applets = append(applets, a)
		}
	}
	if len(applets) == 0 {
		return nil, fmt.Errorf("%s --list: no applets", busybox)
	}
	return applets, nil
}

// kubeSource is the directory dir of k8s.io/kubernetes at version in the
// Go module cache, where hack/testbed-build.sh's builds put it.
func kubeSource(ctx context.Context, version, dir string) (string, error) {
	out, err := exec.CommandContext(ctx, "go", "env", "GOMODCACHE").Output()
	if err != nil {
		return "", fmt.Errorf("go env GOMODCACHE: %w", err)
	}
	p := filepath.Join(strings.TrimSpace(string(out)), "k8s.io", "kubernetes@"+version, dir)
	if _, err := os.Stat(p); err != nil {
		return "", fmt.Errorf("k8s.io/kubernetes@%s not in the module cache (hack/testbed-build.sh downloads it): %w", version, err)
	}
	return p, nil
}
