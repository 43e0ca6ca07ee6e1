package cluster

import (
	"context"
	"os/exec"
	"strings"

	"github.com/switchyard-proxy/switchyard/e2e/testbed/apiserver"
)

// Versions are what a result measured on the bed records: Kubernetes
// (kubelets, control plane, kube-proxy, e2e.test) and CoreDNS as pinned in
// hack/versions.env, and the Switchyard commit ("+dirty" when tracked
// files have changes), so that a number can be traced to the code it
// measured. A value that cannot be read is left out.
func Versions(ctx context.Context) map[string]string {
	v := map[string]string{}
	for key, name := range map[string]string{"K8S_VERSION": "kubernetes", "COREDNS_VERSION": "coredns"} {
		if s, err := PinnedVersion(key); err == nil {
			v[name] = s
		}
	}
	root, err := apiserver.RepoRoot()
	if err != nil {
		return v
	}
	git := func(args ...string) string {
		cmd := exec.CommandContext(ctx, "git", args...)
		cmd.Dir = root
		out, err := cmd.Output()
		if err != nil {
			return ""
		}
		return strings.TrimSpace(string(out))
	}
	if commit := git("rev-parse", "--short=12", "HEAD"); commit != "" {
		if git("status", "--porcelain", "--untracked-files=no") != "" {
			commit += "+dirty"
		}
		v["switchyard"] = commit
	}
	return v
}
