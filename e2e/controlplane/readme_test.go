package controlplane_test

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/switchyard-proxy/switchyard/e2e/testbed/apiserver"
	"github.com/switchyard-proxy/switchyard/e2e/testbed/readme"
)

// readmeAddr is the control plane's address as the README's examples
// spell it; the test's control plane listens elsewhere.
const readmeAddr = "localhost:18000"

// TestREADMEExamples runs the README's marked AdminService examples as
// printed (only the address is the test's control plane's) against the
// real control plane and the fixture, and compares what they print with
// the output the README shows, but fields that name content hashes.
func TestREADMEExamples(t *testing.T) {
	bin := grpcurlPath(t)
	root, err := apiserver.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	examples, err := readme.Read(filepath.Join(root, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	api := apiserver.Start(t)
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	fixture(ctx, t, api)
	cp := startControlPlane(t, api)
	env := append(os.Environ(), "PATH="+filepath.Dir(bin)+":"+os.Getenv("PATH"))

	for _, name := range []string{"explain"} {
		ex, ok := examples[name]
		if !ok {
			t.Errorf("README has no example %q", name)
			continue
		}
		t.Run(name, func(t *testing.T) {
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
			if d := cmp.Diff(jsonWithoutVersions(t, ex.Output), jsonWithoutVersions(t, string(out))); d != "" {
				t.Errorf("README example %q prints otherwise (-README +got):\n%s", name, d)
			}
		})
	}
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
