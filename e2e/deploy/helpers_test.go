package deploy

import (
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"

	"github.com/switchyard-proxy/switchyard/e2e/testbed/apiserver"
)

const systemNS = "switchyard-system"

// repoPath returns a path inside the repository.
func repoPath(t *testing.T, elem ...string) string {
	t.Helper()
	root, err := apiserver.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	return filepath.Join(append([]string{root}, elem...)...)
}

// kubectlPath returns the test bed's kubectl (built with etcd and
// kube-apiserver, same version). It skips like apiserver.Require when it
// is missing, and fails in CI.
func kubectlPath(t *testing.T) string {
	t.Helper()
	dir, err := apiserver.BinDir()
	if err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(dir, "kubectl")
	if _, err := os.Stat(p); err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("kubectl: %v; CI is set, so not skipping", err)
		}
		t.Skipf("kubectl not built (%v); run `make deps`", err)
	}
	return p
}

// kubectl runs the test bed's kubectl and returns stdout; a failure ends
// the test with stderr.
func kubectl(ctx context.Context, t *testing.T, args ...string) []byte {
	t.Helper()
	out, err := kubectlErr(ctx, t, args...)
	if err != nil {
		t.Fatalf("kubectl %s: %v", strings.Join(args, " "), err)
	}
	return out
}

func kubectlErr(ctx context.Context, t *testing.T, args ...string) ([]byte, error) {
	t.Helper()
	cmd := exec.CommandContext(ctx, kubectlPath(t), args...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		return out.Bytes(), errors.Join(err, errors.New(strings.TrimSpace(errb.String())))
	}
	return out.Bytes(), nil
}

// object is one rendered manifest, decoded generically.
type object map[string]any

func (o object) kind() string { return str(o, "kind") }
func (o object) name() string { return str(o, "metadata", "name") }

// render runs `kubectl kustomize dir` and decodes every document.
func render(ctx context.Context, t *testing.T, dir string) []object {
	t.Helper()
	out := kubectl(ctx, t, "kustomize", dir)
	var objs []object
	for _, doc := range bytes.Split(out, []byte("\n---\n")) {
		var o object
		if err := yaml.Unmarshal(doc, &o); err != nil {
			t.Fatalf("kustomize output of %s: %v", dir, err)
		}
		if o != nil {
			objs = append(objs, o)
		}
	}
	return objs
}

// find returns the rendered object of kind and name.
func find(t *testing.T, objs []object, kind, name string) object {
	t.Helper()
	for _, o := range objs {
		if o.kind() == kind && o.name() == name {
			return o
		}
	}
	t.Fatalf("no %s %s in the rendered manifests", kind, name)
	return nil
}

// get walks nested maps; nil when a key is missing.
func get(v any, path ...string) any {
	for _, k := range path {
		m, ok := v.(map[string]any)
		if !ok {
			if o, isObj := v.(object); isObj {
				m = o
			} else {
				return nil
			}
		}
		v = m[k]
	}
	return v
}

func str(v any, path ...string) string {
	s, _ := get(v, path...).(string)
	return s
}

func strs(v any, path ...string) []string {
	var out []string
	l, _ := get(v, path...).([]any)
	for _, e := range l {
		if s, ok := e.(string); ok {
			out = append(out, s)
		}
	}
	return out
}

// agentConfig decodes config.yaml of the agent's ConfigMap.
func agentConfig(t *testing.T, objs []object) map[string]any {
	t.Helper()
	raw := str(find(t, objs, "ConfigMap", "switchyard-agent"), "data", "config.yaml")
	var c map[string]any
	if err := yaml.Unmarshal([]byte(raw), &c); err != nil {
		t.Fatalf("agent config.yaml: %v", err)
	}
	return c
}
