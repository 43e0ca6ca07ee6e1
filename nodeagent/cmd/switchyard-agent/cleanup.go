package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"

	"github.com/switchyard-proxy/switchyard/dataplane"
	"github.com/switchyard-proxy/switchyard/dataplane/command"
	"github.com/switchyard-proxy/switchyard/dataplane/kubeproxycleanup"
	"github.com/switchyard-proxy/switchyard/nodeagent/internal/leftovers"
	"github.com/switchyard-proxy/switchyard/nodeagent/internal/persist"
	switchyardv1 "github.com/switchyard-proxy/switchyard/proto/switchyard/v1"
)

// cleanup is --cleanup: it removes what every mode programmed in this
// namespace (kube-proxy's too with --cleanup-kube-proxy, first: its chains
// share names with ours) and the persisted state, prints one line per
// step to stdout and fails unless every step succeeded. It runs where the
// agent would (the node's namespace) and, like the agent, only ever
// touches that one.
func cleanup(ctx context.Context, c Config, stdout io.Writer, log *slog.Logger) error {
	var errs []error
	if c.CleanupKubeProxy {
		kp := kubeproxycleanup.Config{Runner: command.ExecRunner{}, Logger: log.With("component", "kubeProxyCleanup")}
		res, err := kubeproxycleanup.Run(ctx, kp)
		switch {
		case err != nil:
			fmt.Fprintf(stdout, "kube-proxy: FAILED: %v\n", err)
			errs = append(errs, fmt.Errorf("kube-proxy: %w", err))
		case res.Found():
			fmt.Fprintf(stdout, "kube-proxy: removed (%d chains, %d nftables tables, %d virtual servers, %d ipsets)\n",
				len(res.Chains), len(res.NFTTables), len(res.VirtualServers), len(res.IPSets))
		default:
			fmt.Fprintln(stdout, "kube-proxy: nothing found")
		}
	}
	// stdout is the dry-run mode's, which --cleanup never builds.
	// At once: an uninstall runs once and must leave nothing; an IPVS
	// mode's connections break (the line says how many).
	cl, err := leftovers.New(leftovers.Config{Build: dataplanes(ctx, io.Discard, log), Logger: log.With("component", "cleanup"), AtOnce: true})
	if err != nil {
		return err
	}
	outcomes, err := cl.Clean(ctx, switchyardv1.DataplaneMode_DATAPLANE_MODE_UNSPECIFIED)
	if err != nil {
		errs = append(errs, err)
	}
	for _, o := range outcomes {
		name := dataplane.ModeName(o.Mode)
		switch {
		case o.Err != nil:
			fmt.Fprintf(stdout, "%s: FAILED: %v\n", name, o.Err)
		case o.Skipped != "":
			fmt.Fprintf(stdout, "%s: nothing to remove (%s)\n", name, o.Skipped)
		case o.Cut > 0:
			fmt.Fprintf(stdout, "%s: clean (%d connections it carried were cut)\n", name, o.Cut)
		default:
			fmt.Fprintf(stdout, "%s: clean\n", name)
		}
	}
	removed, err := persist.Remove(c.StateDir)
	if err != nil {
		fmt.Fprintf(stdout, "state: FAILED: %v\n", err)
		errs = append(errs, err)
	} else {
		fmt.Fprintf(stdout, "state: %d file(s) removed from %s\n", len(removed), c.StateDir)
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("cleanup incomplete (rerun to retry): %w", err)
	}
	fmt.Fprintln(stdout, "cleanup complete: nothing of Switchyard is left on this node")
	return nil
}
