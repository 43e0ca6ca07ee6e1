package echo

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"syscall"
)

// ChildEnv carries the JSON Config of a self re-exec'ed echo child.
const ChildEnv = "SWITCHYARD_ECHO_CHILD"

// readyLine is printed on stdout once the sockets are bound.
const readyLine = "echo-ready"

// RunChild serves as an echo child when this process was started as one
// (ChildEnv set) and returns the exit code and true; otherwise it returns
// false at once. Call it first in TestMain or main.
func RunChild() (code int, isChild bool) {
	v, ok := os.LookupEnv(ChildEnv)
	if !ok {
		return 0, false
	}
	var cfg Config
	if err := json.Unmarshal([]byte(v), &cfg); err != nil {
		fmt.Fprintf(os.Stderr, "echo child: bad %s: %v\n", ChildEnv, err)
		return 2, true
	}
	return Main(context.Background(), cfg, os.Stdout, os.Stderr), true
}

// Main binds cfg, prints the ready line on stdout and serves until ctx is done
// or SIGTERM/SIGINT arrives. It returns a process exit code.
func Main(ctx context.Context, cfg Config, stdout, stderr io.Writer) int {
	log := slog.New(slog.NewTextHandler(stderr, nil)).With("echo", cfg.Name)
	srv, err := Listen(cfg, log)
	if err != nil {
		log.Error("listen failed", "err", err)
		return 1
	}
	ctx, stop := signal.NotifyContext(ctx, syscall.SIGTERM, os.Interrupt)
	defer stop()
	if _, err := fmt.Fprintln(stdout, readyLine); err != nil {
		log.Error("report ready", "err", err)
		return 1
	}
	if err := srv.Serve(ctx); err != nil {
		log.Error("serve failed", "err", err)
		return 1
	}
	return 0
}
