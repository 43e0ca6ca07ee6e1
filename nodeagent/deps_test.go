package nodeagent_test

import (
	"os/exec"
	"strings"
	"testing"
)

// TestNoKubernetesClient enforces that the agent needs no Kubernetes
// credentials: nothing in the module, tests included, depends on the Kubernetes API client,
// and the only k8s.io package allowed is k8s.io/utils/clock (and its
// testing fake).
func TestNoKubernetesClient(t *testing.T) {
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Skipf("go tool not found: %v", err)
	}
	out, err := exec.CommandContext(t.Context(), goBin, "list", "-deps", "-test", "./...").CombinedOutput()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, out)
	}
	pkgs := strings.Fields(string(out))
	if len(pkgs) < 10 {
		t.Fatalf("go list returned too little to be meaningful: %q", out)
	}
	allowed := map[string]bool{"k8s.io/utils/clock": true, "k8s.io/utils/clock/testing": true}
	for _, p := range pkgs {
		// Any k8s.io package but the clock fails, the API client first.
		if strings.HasPrefix(p, "k8s.io/") && !allowed[p] {
			t.Errorf("the node agent depends on %s; only k8s.io/utils/clock is allowed", p)
		}
	}
}
