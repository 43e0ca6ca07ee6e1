package cluster_test

import (
	"context"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/switchyard-proxy/switchyard/e2e/cluster"
	"github.com/switchyard-proxy/switchyard/e2e/testbed/probe"
)

const testNS = "bed-test"

// kubectl runs kubectl and fails the test on error.
func kubectl(t *testing.T, c *cluster.Cluster, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 6*time.Minute)
	defer cancel()
	out, err := c.Kubectl(ctx, args...)
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(string(out))
}

// installSwitchyard installs Switchyard from overlay in mode ("" for the
// overlay's own) and waits up to five minutes for its pods to be Ready.
func installSwitchyard(t *testing.T, c *cluster.Cluster, overlay, mode string) {
	t.Helper()
	if err := c.InstallSwitchyard(t.Context(), overlay, mode); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Minute)
	defer cancel()
	if err := c.WaitSwitchyard(ctx); err != nil {
		t.Fatal(err)
	}
}

// applyWorkload applies manifest (as name) and waits up to three minutes
// each for the rollout of ns's echo Deployment and for pods (such as
// "pod/client") to be Ready.
func applyWorkload(t *testing.T, c *cluster.Cluster, ns, name, manifest string, pods ...string) {
	t.Helper()
	if err := c.Apply(t.Context(), name, manifest); err != nil {
		t.Fatal(err)
	}
	kubectl(t, c, "-n", ns, "rollout", "status", "deployment/echo", "--timeout=3m")
	kubectl(t, c, append(append([]string{"-n", ns, "wait"}, pods...), "--for=condition=Ready", "--timeout=3m")...)
}

// waitFor polls cond every 200 ms until it holds or timeout passes.
func waitFor(t *testing.T, what string, timeout time.Duration, cond func() (bool, error)) time.Duration {
	t.Helper()
	begin := time.Now()
	var last error
	for time.Since(begin) < timeout {
		ok, err := cond()
		if ok {
			return time.Since(begin)
		}
		last = err
		time.Sleep(200 * time.Millisecond)
	}
	t.Fatalf("%s: not within %v (last error: %v)", what, timeout, last)
	return 0
}

// spread makes n connections and requires that none fails and that they
// reach at least minBackends backends; a Service created moments ago may
// still be converging (agents batch changes for minSyncPeriod), so the
// spread is retried for up to 30 s, never a failure.
func spread(t *testing.T, p *probe.Prober, what string, addr netip.AddrPort, n, minBackends int) probe.Result {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		res, err := p.TCP(t.Context(), addr, probe.Options{Count: n, Timeout: 2 * time.Second})
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		if len(res.Failures) > 0 {
			t.Fatalf("%s %s: %s: %d failed", what, addr, res, len(res.Failures))
		}
		if len(res.Counts) >= minBackends {
			t.Logf("%s %s: %s", what, addr, res)
			return res
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s %s: %s (want replies from ≥%d backends)", what, addr, res, minBackends)
		}
		time.Sleep(500 * time.Millisecond)
	}
}

// ready counts the echo Service's ready endpoints.
func ready(t *testing.T, c *cluster.Cluster) int {
	t.Helper()
	n, err := c.ReadyEndpoints(t.Context(), testNS, "echo")
	if err != nil {
		t.Fatal(err)
	}
	return n
}
