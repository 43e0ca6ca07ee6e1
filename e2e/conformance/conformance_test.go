package conformance_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/switchyard-proxy/switchyard/e2e/cluster"
	"github.com/switchyard-proxy/switchyard/e2e/conformance"
	"github.com/switchyard-proxy/switchyard/e2e/testbed/netns"
)

// TestFastSubset runs upstream's fast subset (conformance.FastFocus: the
// 15 Services [Conformance] specs and seven more) against Switchyard on the
// real cluster, in one mode per run: SWITCHYARD_CONFORMANCE_MODE, or by
// the commit — iptables when HEAD's last hex digit is even, nftables when
// odd — so CI alternates. Every selected spec must pass.
// SWITCHYARD_CONFORMANCE_FLOWTABLE (interface patterns, "eth*,veth*")
// turns the nftables mode's flowtable fast path on for the run.
// SWITCHYARD_CONFORMANCE_FOCUS narrows the selection for a developer, and
// SWITCHYARD_CONFORMANCE_OUT saves the results as JSON.
func TestFastSubset(t *testing.T) {
	mode := os.Getenv("SWITCHYARD_CONFORMANCE_MODE")
	if mode == "" {
		mode = modeByCommit(t)
	}
	c := cluster.Start(t, cluster.Config{Nodes: 2})
	ctx := t.Context()
	wctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	defer cancel()
	if err := c.InstallWithDNS(wctx, cluster.OverlayBase, mode); err != nil {
		t.Fatal(err)
	}
	proxy := "switchyard-" + mode
	if patterns := os.Getenv("SWITCHYARD_CONFORMANCE_FLOWTABLE"); patterns != "" {
		// The nftables mode's flowtable fast path on every node. On a
		// kernel without flowtables the agents skip it (counted in
		// switchyard_agent_flowtable_skipped_syncs_total): such a run
		// shows the setting breaks nothing, not that the fast path
		// passes.
		setFlowtable(wctx, t, c, patterns)
		proxy += "+flowtable"
	}
	focus, want := conformance.FastFocus, conformance.FastCount
	if f := os.Getenv("SWITCHYARD_CONFORMANCE_FOCUS"); f != "" { // a developer's narrower run
		focus, want = f, 0
	}
	dir := filepath.Join(c.Dir(), "conformance")
	res, err := conformance.Run(ctx, c, conformance.Options{Proxy: proxy, Focus: focus,
		Dir: dir, Timeout: 40 * time.Minute, Logger: netns.TestLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	if out := os.Getenv("SWITCHYARD_CONFORMANCE_OUT"); out != "" {
		if err := res.Write(out); err != nil {
			t.Fatal(err)
		}
	}
	t.Logf("fast subset, Switchyard %s mode: %s", mode, res.Summary())
	if path := os.Getenv("SWITCHYARD_CONFORMANCE_SUMMARY"); path != "" { // make test prints it
		line := fmt.Sprintf("Switchyard %s mode: %d of %d selected specs passed, %d failed, %d skipped, in %v\n", mode,
			res.Count(conformance.Passed), len(res.Specs), res.Count(conformance.Failed), res.Count(conformance.Skipped),
			res.Elapsed.Round(time.Second))
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err == nil {
			_ = os.WriteFile(path, []byte(line), 0o644)
		}
	}
	for _, name := range res.Names() {
		s := res.Specs[name]
		t.Logf("  %-7s %6.1fs %s %s", s.Outcome, s.Duration.Seconds(), name, s.Reason)
		if s.Outcome == conformance.Failed {
			t.Errorf("%s: %s", name, s.Reason)
		}
	}
	if n := res.Count(conformance.Passed); want > 0 && n != want {
		t.Errorf("%d specs passed; the fast subset has %d", n, want)
	}
}

func modeByCommit(t *testing.T) string {
	out, err := exec.Command("git", "rev-parse", "HEAD").Output()
	if err != nil {
		t.Logf("git rev-parse HEAD: %v; iptables mode", err)
		return "iptables"
	}
	h := strings.TrimSpace(string(out))
	if strings.IndexByte("13579bdf", h[len(h)-1]) >= 0 {
		return "nftables"
	}
	return "iptables"
}

// setFlowtable adds flowtableInterfaces (comma-separated patterns) to
// the settings ConfigMap's config.yaml and waits until every node
// applied the new NodeConfig.
func setFlowtable(ctx context.Context, t *testing.T, c *cluster.Cluster, patterns string) {
	t.Helper()
	ns := c.SwitchyardNS()
	cfg, err := c.Kubectl(ctx, "-n", ns, "get", "configmap", "switchyard-controlplane", "-o", `jsonpath={.data.config\.yaml}`)
	if err != nil {
		t.Fatal(err)
	}
	list, err := json.Marshal(strings.Split(patterns, ","))
	if err != nil {
		t.Fatal(err)
	}
	next := strings.TrimRight(string(cfg), "\n") + "\nflowtableInterfaces: " + string(list) + "\n"
	patch, err := json.Marshal(map[string]any{"data": map[string]string{"config.yaml": next}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Kubectl(ctx, "-n", ns, "patch", "configmap", "switchyard-controlplane", "--type=merge", "-p", string(patch)); err != nil {
		t.Fatal(err)
	}
	if _, err := c.WaitSettled(ctx); err != nil {
		t.Fatal(err)
	}
	t.Logf("flowtable on: config.yaml now\n%s", next)
}
