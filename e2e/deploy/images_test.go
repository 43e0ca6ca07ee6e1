package deploy

import (
	"bufio"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

// dockerfile is what the checks need from one Dockerfile.
type dockerfile struct {
	copies   [][]string // local sources of each COPY without --from
	builds   []string   // package paths of `go build ... ./pkg`
	goImages []string   // golang base image tags
}

var buildPkg = regexp.MustCompile(`go build .*?(\./[\w./-]+)\s*$`)

// parseDockerfile reads instructions, joining continuation lines.
func parseDockerfile(t *testing.T, path string) dockerfile {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var d dockerfile
	var cur string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if strings.HasPrefix(line, "#") || line == "" {
			continue
		}
		if s, ok := strings.CutSuffix(line, "\\"); ok {
			cur += s + " "
			continue
		}
		d.add(cur + line)
		cur = ""
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return d
}

func (d *dockerfile) add(instr string) {
	f := strings.Fields(instr)
	switch strings.ToUpper(f[0]) {
	case "COPY":
		args := f[1:]
		for len(args) > 0 && strings.HasPrefix(args[0], "--") {
			if strings.HasPrefix(args[0], "--from") {
				return
			}
			args = args[1:]
		}
		if len(args) >= 2 {
			d.copies = append(d.copies, args[:len(args)-1])
		}
	case "FROM":
		if strings.HasPrefix(f[1], "golang:") {
			d.goImages = append(d.goImages, f[1])
		}
	case "RUN":
		if m := buildPkg.FindStringSubmatch(instr); m != nil {
			d.builds = append(d.builds, m[1])
		}
	}
}

// workspaceModules reads the `use` directories of go.work.
func workspaceModules(t *testing.T) []string {
	t.Helper()
	raw, err := os.ReadFile(repoPath(t, "go.work"))
	if err != nil {
		t.Fatal(err)
	}
	var mods []string
	for _, m := range regexp.MustCompile(`(?m)^\s*\./(\S+)\s*$`).FindAllStringSubmatch(string(raw), -1) {
		mods = append(mods, m[1])
	}
	if len(mods) == 0 {
		t.Fatal("no use directives in go.work")
	}
	return mods
}

// TestDockerfiles checks both images without a Docker engine: every COPY
// source exists in the build context (the repository root), every module of
// go.work gets its go.mod copied (or the go command refuses the workspace),
// the sources of the modules each binary imports are copied, and the
// package each image builds compiles from the workspace.
func TestDockerfiles(t *testing.T) {
	images := map[string]struct {
		pkg     string
		modules []string // modules whose sources the binary needs
	}{
		"controlplane.Dockerfile": {"./controlplane/cmd/switchyard-controlplane", []string{"certfile", "proto", "controlplane"}},
		"agent.Dockerfile":        {"./nodeagent/cmd/switchyard-agent", []string{"certfile", "proto", "dataplane", "nodeagent"}},
	}
	for file, want := range images {
		t.Run(file, func(t *testing.T) {
			d := parseDockerfile(t, repoPath(t, "deploy", "images", file))
			var copied []string
			for _, srcs := range d.copies {
				for _, src := range srcs {
					if _, err := os.Stat(repoPath(t, src)); err != nil {
						t.Errorf("COPY source %s: %v", src, err)
					}
					copied = append(copied, strings.TrimSuffix(src, "/"))
				}
			}
			for _, m := range workspaceModules(t) {
				if !slices.Contains(copied, m+"/go.mod") {
					t.Errorf("go.work uses %s but %s/go.mod is not copied", m, m)
				}
			}
			for _, m := range want.modules {
				if !slices.Contains(copied, m) {
					t.Errorf("%s needs the sources of %s, not copied", want.pkg, m)
				}
			}
			if len(d.goImages) == 0 {
				t.Error("no golang build stage")
			}
			if !slices.Equal(d.builds, []string{want.pkg}) {
				t.Fatalf("go build targets %v, want [%s]", d.builds, want.pkg)
			}
			buildBinary(t, want.pkg)
		})
	}
}

var (
	buildMu    sync.Mutex
	buildCache = map[string]string{}
	buildDir   string // removed by TestMain
)

func TestMain(m *testing.M) {
	code := m.Run()
	if buildDir != "" {
		os.RemoveAll(buildDir)
	}
	os.Exit(code)
}

// buildBinary builds pkg (a ./path from the repository root) inside the
// workspace, as the Dockerfile does, once per test binary.
func buildBinary(t *testing.T, pkg string) string {
	t.Helper()
	buildMu.Lock()
	defer buildMu.Unlock()
	if p, ok := buildCache[pkg]; ok {
		return p
	}
	if buildDir == "" {
		dir, err := os.MkdirTemp("", "switchyard-deploy-test-")
		if err != nil {
			t.Fatal(err)
		}
		buildDir = dir
	}
	out := filepath.Join(buildDir, filepath.Base(pkg))
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "go", "build", "-trimpath", "-o", out, pkg)
	cmd.Dir = repoPath(t)
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build %s: %v\n%s", pkg, err, b)
	}
	buildCache[pkg] = out
	return out
}
