package launch

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"time"

	"github.com/switchyard-proxy/switchyard/e2e/testbed/apiserver"
)

// Packages of the Switchyard commands, built from the workspace.
const (
	ControlPlanePkg = "github.com/switchyard-proxy/switchyard/controlplane/cmd/switchyard-controlplane"
	AgentPkg        = "github.com/switchyard-proxy/switchyard/nodeagent/cmd/switchyard-agent"
)

// Binaries are built Switchyard commands.
type Binaries struct {
	ControlPlane, Agent string
}

// BuildSwitchyard compiles switchyard-controlplane and switchyard-agent
// from the workspace into outDir with one go build. log may be nil.
func BuildSwitchyard(ctx context.Context, outDir string, log *slog.Logger) (Binaries, error) {
	out, err := Build(ctx, outDir, log, ControlPlanePkg, AgentPkg)
	if err != nil {
		return Binaries{}, err
	}
	return Binaries{ControlPlane: out[0], Agent: out[1]}, nil
}

// Build compiles the main packages pkgs (import paths of the workspace)
// into outDir with one `go build -trimpath`, CGO_ENABLED=0, from the
// repository root, and returns the binaries' paths in the order of pkgs.
// log may be nil.
func Build(ctx context.Context, outDir string, log *slog.Logger, pkgs ...string) ([]string, error) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if len(pkgs) == 0 {
		return nil, nil
	}
	root, err := apiserver.RepoRoot()
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(outDir, 0o755); err != nil {
		return nil, fmt.Errorf("go build: %w", err)
	}
	start := time.Now()
	log.Info("building", "packages", pkgs, "dir", outDir)
	args := append([]string{"build", "-trimpath", "-o", outDir + string(filepath.Separator)}, pkgs...)
	cmd := exec.CommandContext(ctx, "go", args...)
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if b, err := cmd.CombinedOutput(); err != nil {
		return nil, fmt.Errorf("go build %v: %w\n%s", pkgs, err, b)
	}
	log.Info("built", "elapsed", time.Since(start).Round(time.Millisecond))
	out := make([]string, len(pkgs))
	for i, pkg := range pkgs {
		out[i] = filepath.Join(outDir, path.Base(pkg))
	}
	return out, nil
}
