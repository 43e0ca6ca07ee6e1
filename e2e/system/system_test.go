package system_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/switchyard-proxy/switchyard/e2e/system"
	"github.com/switchyard-proxy/switchyard/e2e/testbed/apiserver"
	"github.com/switchyard-proxy/switchyard/e2e/testbed/echo"
	"github.com/switchyard-proxy/switchyard/e2e/testbed/launch"
	"github.com/switchyard-proxy/switchyard/e2e/testbed/netns"
)

// binDir holds the commands built once for every cluster of this run.
var binDir string

func TestMain(m *testing.M) {
	if code, ok := echo.RunChild(); ok { // echo servers re-exec this binary
		os.Exit(code)
	}
	dir, err := os.MkdirTemp("", "switchyard-system-bin-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	binDir = dir
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// prebuiltEnv names a directory holding switchyard-controlplane and
// switchyard-agent, built already: where this binary runs without the Go
// toolchain or the checkout (inside the QEMU guest of `make
// ipvs-scenarios`).
const prebuiltEnv = "SWITCHYARD_PREBUILT_BIN"

var build = sync.OnceValues(func() (launch.Binaries, error) {
	if dir := os.Getenv(prebuiltEnv); dir != "" {
		bin := launch.Binaries{ControlPlane: filepath.Join(dir, "switchyard-controlplane"), Agent: filepath.Join(dir, "switchyard-agent")}
		for _, p := range []string{bin.ControlPlane, bin.Agent} {
			if _, err := os.Stat(p); err != nil {
				return launch.Binaries{}, fmt.Errorf("%s=%s: %w", prebuiltEnv, dir, err)
			}
		}
		return bin, nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	return launch.BuildSwitchyard(ctx, binDir, nil)
})

// startCluster skips (or fails in CI) without root or the test-bed binaries,
// starts a cluster with mutual TLS between the tiers, and tears it down on
// cleanup, printing every component's output if the test failed.
func startCluster(t *testing.T, cfg system.Config) *system.Cluster {
	t.Helper()
	cfg.TLS = true
	return startClusterAs(t, cfg)
}

// startClusterAs is startCluster with cfg.TLS as given: false starts a
// plaintext cluster, as deploy/overlays/plaintext and the README's
// examples (grpcurl -plaintext).
func startClusterAs(t *testing.T, cfg system.Config) *system.Cluster {
	t.Helper()
	netns.RequireRoot(t)
	apiserver.Require(t)
	bin, err := build()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()
	cfg.Binaries, cfg.Logger = &bin, netns.TestLogger(t)
	start := time.Now()
	c, err := system.Start(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	grpc := "plaintext"
	if cfg.TLS {
		grpc = "mTLS"
	}
	t.Logf("cluster up in %v: %d nodes, %d pods, %d control-plane replica(s), %s",
		time.Since(start).Round(time.Millisecond), len(c.Topo.Nodes()), len(c.Topo.Pods()), len(c.ControlPlaneTargets()), grpc)
	t.Cleanup(func() {
		if t.Failed() {
			for i := range c.ControlPlaneTargets() {
				t.Logf("control plane %d logs:\n%s", i, c.ControlPlaneLogsAt(i))
			}
			for i, n := range c.Topo.Nodes() {
				t.Logf("agent %s logs:\n%s", n.Name, c.AgentLogs(i))
			}
		}
		if err := c.Close(); err != nil {
			t.Errorf("teardown: %v", err)
		}
	})
	settle, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	if err := c.WaitSettled(settle); err != nil { // agents use replica 0 first
		t.Fatal(err)
	}
	return c
}

// waitFor polls cond until it holds or 60 s pass (a generous deadline, not
// a bound under test).
func waitFor(ctx context.Context, t *testing.T, what string, cond func() (bool, string)) {
	t.Helper()
	if err := poll(ctx, time.Minute, cond); err != nil {
		t.Fatalf("waiting until %s: %v", what, err)
	}
}

// poll calls cond every 20 ms until it holds, ctx ends or timeout passes.
func poll(ctx context.Context, timeout time.Duration, cond func() (bool, string)) error {
	return pollEvery(ctx, timeout, 20*time.Millisecond, cond)
}

// pollEvery is poll with another pause between calls, for conditions that
// cost a burst of connections each.
func pollEvery(ctx context.Context, timeout, every time.Duration, cond func() (bool, string)) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	for {
		ok, last := cond()
		if ok {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%w; last: %s", ctx.Err(), last)
		case <-time.After(every):
		}
	}
}
