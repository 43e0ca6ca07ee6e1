// Command switchyard-benchcp is the control plane fed from an in-memory
// clientset (package bench) for the fan-out benchmark: it loads a cluster
// from a JSON file, serves the discovery gRPC services like
// switchyard-controlplane, and takes changes on an HTTP control API.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"syscall"
	"time"

	"k8s.io/klog/v2"

	"github.com/switchyard-proxy/switchyard/controlplane/internal/bench"
)

func main() {
	if err := run(os.Args[1:], os.Stderr); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			os.Exit(0)
		}
		fmt.Fprintln(os.Stderr, "switchyard-benchcp:", err)
		os.Exit(1)
	}
}

func run(args []string, stderr io.Writer) error {
	var (
		cfg            bench.Config
		objects, level string
		fs             = flag.NewFlagSet("switchyard-benchcp", flag.ContinueOnError)
	)
	fs.SetOutput(stderr)
	fs.StringVar(&objects, "objects", "", "JSON file of the cluster to load (see package bench)")
	fs.StringVar(&cfg.Daemon.Listen, "listen", "127.0.0.1:18000", "gRPC address")
	fs.StringVar(&cfg.Daemon.MetricsAddr, "metrics-bind-address", "", "HTTP address for /metrics; empty disables")
	fs.StringVar(&cfg.Daemon.HealthzAddr, "healthz-bind-address", "", "HTTP address for /healthz and /readyz; empty disables")
	fs.StringVar(&cfg.ControlAddr, "control-address", "127.0.0.1:0", "HTTP address of the control API")
	fs.DurationVar(&cfg.Daemon.CoalesceWindow, "coalesce-window", 100*time.Millisecond, "minimum time between two responses to a node: a change to an idle node goes out at once, later ones within the window are batched")
	fs.IntVar(&cfg.Daemon.MaxMessageBytes, "max-message-bytes", 4<<20, "largest gRPC message; larger batches are split")
	fs.StringVar(&level, "log-level", "warn", "debug, info, warn or error")
	if err := fs.Parse(args); err != nil {
		return err
	}
	var lvl slog.Level
	if err := lvl.UnmarshalText([]byte(level)); err != nil {
		return fmt.Errorf("--log-level: %w", err)
	}
	logger := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: lvl}))
	klog.SetSlogLogger(logger)
	o, err := bench.ReadObjects(objects)
	if err != nil {
		return err
	}
	cfg.Objects, cfg.Logger = o, logger
	cfg.Daemon.Insecure = true
	cfg.Daemon.ID = "benchcp"
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	return bench.Run(ctx, cfg)
}
