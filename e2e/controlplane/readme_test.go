package controlplane_test

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/switchyard-proxy/switchyard/e2e/internal/checkout"
	"github.com/switchyard-proxy/switchyard/e2e/testbed/readme"
)

// readmeAddr is the control plane's address as the README's examples
// spell it; the test's control plane listens elsewhere.
const readmeAddr = "localhost:18000"

// readmeExamples are the README's marked AdminService examples: grpcurl's
// and switchyardctl's.
var readmeExamples = []string{"explain", "ctl-status", "ctl-explain"}

const ctlPkg = "github.com/switchyard-proxy/switchyard/controlplane/cmd/switchyardctl"

// TestREADMEExamples runs the README's marked AdminService examples as
// printed (only the address is the test's control plane's) against the
// real control plane and the fixture, and compares what they print with
// the output the README shows: JSON but fields that name content hashes,
// text (switchyardctl's tables) with hashes and padding normalized. No
// agent is connected, so every node's view is desired, none applied.
func TestREADMEExamples(t *testing.T) {
	examples := checkout.Examples(t)
	ctx, api, _ := withFixture(t)
	cp := startControlPlane(t, api)

	for _, name := range readmeExamples {
		ex, ok := examples[name]
		if !ok {
			t.Errorf("README has no example %q", name)
			continue
		}
		t.Run(name, func(t *testing.T) {
			path := os.Getenv("PATH")
			if tools := toolPath(t, ex.Commands); tools != "" {
				path = tools + ":" + path
			}
			env := append(os.Environ(), "PATH="+path)
			var out []byte
			for _, c := range ex.Commands {
				cmd := exec.CommandContext(ctx, "sh", "-c", strings.ReplaceAll(c, readmeAddr, cp.grpc))
				cmd.Env = env
				b, err := cmd.CombinedOutput()
				if err != nil {
					t.Fatalf("%s: %v\n%s", c, err, b)
				}
				out = append(out, b...)
			}
			switch {
			case ex.Output != "":
				if d := cmp.Diff(jsonWithoutVersions(t, ex.Output), jsonWithoutVersions(t, string(out))); d != "" {
					t.Errorf("README example %q prints otherwise (-README +got):\n%s", name, d)
				}
			case ex.Text != "":
				if !readme.SameText(ex.Text, string(out)) {
					t.Errorf("README example %q prints otherwise (-README +got):\n%s\ngot:\n%s",
						name, cmp.Diff(readme.Normalize(ex.Text), readme.Normalize(string(out))), out)
				}
			default:
				t.Errorf("README example %q shows no output to compare", name)
			}
		})
	}
}

// toolPath is the PATH entries the commands need: grpcurl from bin/ (the
// subtest skips without it, as TestGrpcurl) and switchyardctl built from
// the workspace.
func toolPath(t *testing.T, commands []string) string {
	t.Helper()
	var dirs []string
	for _, c := range commands {
		switch {
		case strings.HasPrefix(c, "grpcurl "):
			dirs = append(dirs, filepath.Dir(checkout.Grpcurl(t)))
		case strings.HasPrefix(c, "switchyardctl "):
			dirs = append(dirs, filepath.Dir(build(t, ctlPkg)))
		}
	}
	return strings.Join(dirs, ":")
}

// jsonWithoutVersions decodes one JSON object and drops "version", a
// content hash the README cannot know.
func jsonWithoutVersions(t *testing.T, s string) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal([]byte(s), &m); err != nil {
		t.Fatalf("not one JSON object: %v\n%s", err, s)
	}
	delete(m, "version")
	return m
}
