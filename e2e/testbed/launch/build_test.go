package launch

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/switchyard-proxy/switchyard/e2e/testbed/apiserver"
)

// TestBuildSwitchyard builds both commands with one go build.
func TestBuildSwitchyard(t *testing.T) {
	if testing.Short() {
		t.Skip("links the control plane and the agent")
	}
	if _, err := apiserver.RepoRoot(); err != nil {
		t.Skip(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Minute)
	defer cancel()
	dir := filepath.Join(t.TempDir(), "bin")
	bins, err := BuildSwitchyard(ctx, dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{filepath.Join(dir, "switchyard-controlplane"), filepath.Join(dir, "switchyard-agent")} {
		st, err := os.Stat(want)
		if err != nil || st.Mode()&0o111 == 0 {
			t.Errorf("%s: %v, mode %v", want, err, st)
		}
	}
	if bins.ControlPlane != filepath.Join(dir, "switchyard-controlplane") || bins.Agent != filepath.Join(dir, "switchyard-agent") {
		t.Errorf("BuildSwitchyard = %+v", bins)
	}
	if out, err := Build(ctx, dir, nil); err != nil || out != nil {
		t.Errorf("Build of nothing = %v, %v", out, err)
	}
}
