package system_test

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/switchyard-proxy/switchyard/e2e/system"
	"github.com/switchyard-proxy/switchyard/e2e/testbed/apiserver"
	"github.com/switchyard-proxy/switchyard/e2e/testbed/echo"
	"github.com/switchyard-proxy/switchyard/e2e/testbed/netns"
	"github.com/switchyard-proxy/switchyard/e2e/testbed/probe"
)

func TestMain(m *testing.M) {
	if code, ok := echo.RunChild(); ok { // echo servers re-exec this binary
		os.Exit(code)
	}
	os.Exit(m.Run())
}

// startCluster skips (or fails in CI) without root or the test-bed binaries
// and tears the cluster down on cleanup.
func startCluster(t *testing.T) *system.Cluster {
	t.Helper()
	netns.RequireRoot(t)
	apiserver.Require(t)
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()
	c, err := system.Start(ctx, system.Config{Nodes: 2, Pods: 3, Logger: netns.TestLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("control plane logs:\n%s", c.ControlPlaneLogs())
		}
		if err := c.Close(); err != nil {
			t.Errorf("teardown: %v", err)
		}
	})
	return c
}

// source is a namespace connections start from.
type source struct{ name, ns string }

func sources(c *system.Cluster) []source {
	var out []source
	for _, n := range c.Topo.Nodes() {
		out = append(out, source{n.Name, n.NS})
	}
	return append(out, source{"client (via node0)", c.Topo.Client().NS})
}

func TestClusterIPFromBothNodes(t *testing.T) {
	c := startCluster(t)
	ctx := t.Context()
	settle, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	if err := c.WaitSettled(settle); err != nil {
		t.Fatal(err)
	}

	t.Run("every pod answers from every source", func(t *testing.T) {
		for _, src := range sources(c) {
			res, err := probe.New(c.Topo, src.ns).TCP(ctx, c.VIP(), probe.Options{Count: 60, Parallel: 4, Timeout: 2 * time.Second})
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("%s → %s: %v", src.name, c.VIP(), res.Counts)
			if len(res.Failures) > 0 {
				t.Errorf("%s: %d failures, first %v", src.name, len(res.Failures), res.Failures[0])
			}
			for _, p := range c.Topo.Pods() {
				if res.Counts[p.Name] == 0 {
					t.Errorf("%s: pod %s never answered: %v", src.name, p.Name, res.Counts)
				}
			}
		}
	})

	t.Run("traffic follows a scale-down", func(t *testing.T) {
		only := c.Topo.Pods()[1]
		if err := c.ScaleTo(ctx, []netns.Pod{only}); err != nil {
			t.Fatal(err)
		}
		for _, src := range sources(c) {
			waitFor(ctx, t, src.name+" reaches only "+only.Name, func() (bool, string) {
				res, err := probe.New(c.Topo, src.ns).TCP(ctx, c.VIP(), probe.Options{Count: 20, Parallel: 4, Timeout: time.Second})
				if err != nil {
					t.Fatal(err)
				}
				return res.Counts[only.Name] == 20, res.String()
			})
		}
		settle, cancel := context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
		if err := c.WaitSettled(settle); err != nil {
			t.Fatal(err)
		}
	})

	t.Run("a deleted service refuses connections", func(t *testing.T) {
		if err := c.DeleteService(ctx); err != nil {
			t.Fatal(err)
		}
		for _, src := range sources(c) {
			waitFor(ctx, t, src.name+" fails to connect", func() (bool, string) {
				res, err := probe.New(c.Topo, src.ns).TCP(ctx, c.VIP(), probe.Options{Count: 5, Parallel: 5})
				if err != nil {
					t.Fatal(err)
				}
				return res.Succeeded() == 0 && len(res.Failures) == 5, res.String()
			})
		}
		res, err := probe.New(c.Topo, c.Topo.Node(0).NS).TCP(ctx, c.VIP(), probe.Options{Count: 5, Parallel: 5})
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("after delete, node-0 → %s: %v", c.VIP(), res.Reasons())
		settle, cancel := context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
		if err := c.WaitSettled(settle); err != nil {
			t.Fatal(err)
		}
	})
}

// waitFor polls cond until it holds or 30 s pass.
func waitFor(ctx context.Context, t *testing.T, what string, cond func() (bool, string)) {
	t.Helper()
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	for {
		ok, last := cond()
		if ok {
			return
		}
		select {
		case <-ctx.Done():
			t.Fatalf("timed out waiting until %s; last: %s", what, last)
		case <-time.After(100 * time.Millisecond):
		}
	}
}
