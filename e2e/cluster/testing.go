package cluster

import (
	"context"
	"testing"
	"time"

	"github.com/switchyard-proxy/switchyard/e2e/cluster/images"
	"github.com/switchyard-proxy/switchyard/e2e/testbed/apiserver"
	"github.com/switchyard-proxy/switchyard/e2e/testbed/netns"
)

// ImageTag is the tag of the Switchyard images the overlays name; the
// rolling-update test switches the agent to AltImageTag.
const (
	ImageTag    = "bed"
	AltImageTag = "bed2"
)

// BuildImages builds (or takes from the cache) every image the bed runs.
func BuildImages(ctx context.Context, cfg Config) ([]images.Archive, error) {
	return buildImages(ctx, cfg, nil)
}

func buildImages(ctx context.Context, cfg Config, only []string) ([]images.Archive, error) {
	root, err := apiserver.RepoRoot()
	if err != nil {
		return nil, err
	}
	if cfg.BinDir == "" {
		if cfg.BinDir, err = apiserver.BinDir(); err != nil {
			return nil, err
		}
	}
	return images.Build(ctx, images.Options{RepoRoot: root, BinDir: cfg.BinDir, Tag: ImageTag, Only: only, Logger: cfg.Logger})
}

// BuildSuiteImages builds (or takes from the cache) the opt-in images only
// the full upstream suite runs (images.Conformance: glibc-dns-testing,
// regression-issue-74839, nginx); regression-issue-74839 comes from the
// test-bed bin dir (BUILD_E2E=1 hack/testbed-build.sh). Pass the archives
// in Config.Images.
func BuildSuiteImages(ctx context.Context, cfg Config) ([]images.Archive, error) {
	return buildImages(ctx, cfg, images.Conformance())
}

// WithImages returns cfg importing archives, with the agent also tagged
// AltImageTag.
func WithImages(cfg Config, archives []images.Archive) Config {
	for _, a := range archives {
		cfg.Images = append(cfg.Images, a.Path)
	}
	cfg.Aliases = map[string][]string{images.AgentRef(ImageTag): {images.AgentRef(AltImageTag)}}
	return cfg
}

// Start brings up a cluster for a test, with every image imported, and
// tears it down in t.Cleanup, failing the test if anything is left behind.
// It skips without root or without the built binaries (fails in CI).
func Start(t *testing.T, cfg Config) *Cluster {
	t.Helper()
	netns.RequireRoot(t)
	apiserver.Require(t)
	if cfg.Logger == nil {
		cfg.Logger = netns.TestLogger(t)
	}
	d, err := cfg.withDefaults()
	if err != nil {
		t.Fatal(err)
	}
	archives, err := BuildImages(t.Context(), d)
	if err != nil {
		t.Fatalf("images: %v", err)
	}
	c, err := Up(t.Context(), WithImages(cfg, archives))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		if t.Failed() {
			c.dumpState(ctx, t)
		}
		if err := c.Down(ctx); err != nil {
			t.Errorf("teardown: %v", err)
		}
	})
	return c
}

// dumpState logs what a failed test needs to see: pods, events, and the
// tails of the Switchyard pods' logs.
func (c *Cluster) dumpState(ctx context.Context, t *testing.T) {
	for _, args := range [][]string{
		{"get", "pods", "-A", "-o", "wide"},
		{"get", "events", "-A", "--sort-by=.lastTimestamp"},
		{"-n", SystemNS, "logs", "-l", "app.kubernetes.io/part-of=switchyard", "--tail=40", "--prefix"},
	} {
		out, err := c.Kubectl(ctx, args...)
		t.Logf("kubectl %v (err %v):\n%s", args, err, out)
	}
}
