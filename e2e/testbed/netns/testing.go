package netns

import (
	"context"
	"log/slog"
	"os"
	"testing"
	"time"
)

// RequireRoot skips the test when not running as root, with a message saying
// how to run it. When the CI environment variable is set it fails instead, so
// that a misconfigured CI job cannot pass by skipping everything.
func RequireRoot(t testing.TB) {
	t.Helper()
	if os.Geteuid() == 0 {
		return
	}
	if os.Getenv("CI") != "" {
		t.Fatalf("this test needs root to create network namespaces, and CI=%q is set: refusing to skip", os.Getenv("CI"))
	}
	t.Skip("needs root to create network namespaces (run the tests as root, e.g. sudo -E go test ...)")
}

// TestLogger returns a logger that writes through t.Output(), without
// timestamps.
func TestLogger(t testing.TB) *slog.Logger {
	return slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{
		ReplaceAttr: func(groups []string, a slog.Attr) slog.Attr {
			if len(groups) == 0 && a.Key == slog.TimeKey {
				return slog.Attr{}
			}
			return a
		},
	}))
}

// New builds a topology for a test and registers its teardown with
// t.Cleanup, which runs even when the test fails. It skips the test when not
// root (see RequireRoot).
func New(t testing.TB, spec Spec) *Topology {
	t.Helper()
	RequireRoot(t)
	topo, err := Create(t.Context(), spec, Options{Logger: TestLogger(t)})
	if err != nil {
		t.Fatalf("netns.New: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if err := topo.Close(ctx); err != nil {
			t.Errorf("teardown: %v", err)
		}
	})
	return topo
}
