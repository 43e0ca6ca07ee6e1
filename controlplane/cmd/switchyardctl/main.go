// Command switchyardctl is a small CLI for people over the control plane's
// AdminService: status, explain, view, diff, service, rollout. Its logic is in
// controlplane/internal/ctl, tested there without a process.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"github.com/switchyard-proxy/switchyard/controlplane/internal/ctl"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := ctl.Run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}
