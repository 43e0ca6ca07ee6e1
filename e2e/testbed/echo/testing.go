package echo

import (
	"context"
	"log/slog"
	"testing"
)

// ServeLoopback runs a server in this process on 127.0.0.1 (ephemeral TCP
// and UDP ports) until the test ends. Loopback only: no root needed and
// nothing outside the process changes. cfg.TCP and cfg.UDP are overridden.
func ServeLoopback(t testing.TB, cfg Config, log *slog.Logger) *Server {
	t.Helper()
	cfg.TCP, cfg.UDP = "127.0.0.1:0", "127.0.0.1:0"
	srv, err := Listen(cfg, log)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Serve: %v", err)
		}
	})
	return srv
}
