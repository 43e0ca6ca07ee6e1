package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"sync"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/switchyard-proxy/switchyard/dataplane"
	"github.com/switchyard-proxy/switchyard/dataplane/command"
	"github.com/switchyard-proxy/switchyard/dataplane/conntrack"
	"github.com/switchyard-proxy/switchyard/dataplane/dryrun"
	"github.com/switchyard-proxy/switchyard/dataplane/iptables"
	"github.com/switchyard-proxy/switchyard/dataplane/ipvs"
	"github.com/switchyard-proxy/switchyard/dataplane/nftables"
	"github.com/switchyard-proxy/switchyard/dataplane/nftgen"
	"github.com/switchyard-proxy/switchyard/dataplane/userspace"
	"github.com/switchyard-proxy/switchyard/dataplane/xtinfo"
	switchyardv1 "github.com/switchyard-proxy/switchyard/proto/switchyard/v1"
)

var modes = map[string]switchyardv1.DataplaneMode{
	"iptables":  switchyardv1.DataplaneMode_DATAPLANE_MODE_IPTABLES,
	"ipvs":      switchyardv1.DataplaneMode_DATAPLANE_MODE_IPVS,
	"nftables":  switchyardv1.DataplaneMode_DATAPLANE_MODE_NFTABLES,
	"userspace": switchyardv1.DataplaneMode_DATAPLANE_MODE_USERSPACE,
	"dry-run":   switchyardv1.DataplaneMode_DATAPLANE_MODE_DRY_RUN,
}

func parseMode(s string) (switchyardv1.DataplaneMode, error) {
	m, ok := modes[s]
	if !ok {
		return 0, fmt.Errorf("--mode %q: want iptables|ipvs|nftables|userspace|dry-run", s)
	}
	return m, nil
}

// dataplanes builds the dataplane of a mode, once: the flag check at start
// and the agent (and a later switch back to the mode) share one instance,
// so a mode's kernel handles are opened once. Building iptables, nftables
// or userspace touches no kernel state (iptables detects its flavour on the
// first Apply, in the namespace the agent runs in: the node's); ipvs checks
// that the kernel has IPVS and refuses the mode otherwise. ctx bounds the
// background work a mode runs (ipvs drains weight-0 real servers).
func dataplanes(ctx context.Context, stdout io.Writer, log *slog.Logger) func(switchyardv1.DataplaneMode) (dataplane.Dataplane, error) {
	var mu sync.Mutex
	built := map[switchyardv1.DataplaneMode]dataplane.Dataplane{}
	return func(m switchyardv1.DataplaneMode) (dataplane.Dataplane, error) {
		mu.Lock()
		defer mu.Unlock()
		if dp, ok := built[m]; ok {
			return dp, nil
		}
		var (
			dp  dataplane.Dataplane
			err error
		)
		switch m {
		case switchyardv1.DataplaneMode_DATAPLANE_MODE_DRY_RUN:
			dp = dryrun.New(stdout)
		case switchyardv1.DataplaneMode_DATAPLANE_MODE_IPTABLES:
			dp, err = newIPTables(log)
		case switchyardv1.DataplaneMode_DATAPLANE_MODE_NFTABLES:
			dp, err = newNFTables(log)
		case switchyardv1.DataplaneMode_DATAPLANE_MODE_IPVS:
			dp, err = newIPVS(ctx, log)
		case switchyardv1.DataplaneMode_DATAPLANE_MODE_USERSPACE:
			dp, err = userspace.New(userspace.Config{Logger: log.With("mode", "userspace")})
			if err != nil {
				err = fmt.Errorf("userspace mode: %w", err)
			}
		default:
			err = fmt.Errorf("unknown dataplane mode %s", dataplane.ModeName(m))
		}
		if err != nil {
			return nil, err
		}
		built[m] = dp
		return dp, nil
	}
}

func newIPTables(log *slog.Logger) (dataplane.Dataplane, error) {
	return withConntrack("iptables", func(ct conntrack.Netlink) (dataplane.Dataplane, error) {
		return iptables.New(iptables.Config{
			Runner:    command.ExecRunner{},
			Conntrack: ct,
			Logger:    log.With("mode", "iptables"),
			// The drift checks' cheap fingerprints: the nf_tables generation
			// (iptables-nft) and the x_tables entry counts (legacy); without
			// them every check reads the tables back.
			Generation: nftgen.NewReader(nftgen.DialOwnNamespace).Generation,
			LegacyInfo: xtinfo.NewReader(xtinfo.DialOwnNamespace).Info,
		})
	})
}

func newNFTables(log *slog.Logger) (dataplane.Dataplane, error) {
	return withConntrack("nftables", func(ct conntrack.Netlink) (dataplane.Dataplane, error) {
		return nftables.New(nftables.Config{
			Runner:    command.ExecRunner{},
			Conntrack: ct,
			Logger:    log.With("mode", "nftables"),
			// Partial syncs over netlink: 4-10x less CPU than nft 1.0.6, which
			// loads every chain name before adding a rule; full syncs use nft.
			PartialNetlink: nftables.DialOwnNamespace,
		})
	})
}

// withConntrack builds mode's dataplane with conntrack cleanup over a
// netlink handle of its own, which it closes when the build fails (a built
// dataplane owns it from then on).
func withConntrack(mode string, build func(conntrack.Netlink) (dataplane.Dataplane, error)) (dataplane.Dataplane, error) {
	h, err := netlink.NewHandle(unix.NETLINK_NETFILTER)
	if err != nil {
		return nil, fmt.Errorf("%s mode: netlink handle for conntrack: %w", mode, err)
	}
	dp, err := build(conntrack.Netlink{Handle: h})
	if err != nil {
		h.Close()
		return nil, fmt.Errorf("%s mode: %w", mode, err)
	}
	return dp, nil
}

// conntrackTable is the conntrack reconciler's table, over a netlink
// handle of its own in the agent's namespace (the node's); nil when
// --conntrack-reconcile-interval is 0. The handle lives as long as the
// process.
func conntrackTable(c Config) (conntrack.Table, error) {
	if c.ConntrackReconcileInterval.Duration <= 0 {
		return nil, nil
	}
	h, err := netlink.NewHandle(unix.NETLINK_NETFILTER)
	if err != nil {
		return nil, fmt.Errorf("conntrack reconciler: netlink handle: %w", err)
	}
	return conntrack.Netlink{Handle: h}, nil
}

func newIPVS(ctx context.Context, log *slog.Logger) (dataplane.Dataplane, error) {
	k, err := ipvs.NewKernel(ipvs.KernelConfig{}) // the agent's namespace: the node's
	if err != nil {
		return nil, fmt.Errorf("ipvs mode: %w", err)
	}
	dp, err := ipvs.New(k.Config(ipvs.Config{Logger: log.With("mode", "ipvs")}))
	if err != nil {
		k.Close()
		return nil, fmt.Errorf("ipvs mode: %w", err)
	}
	// Each Apply drains too; Run also drains between Applies, so a
	// removed endpoint's real server goes as soon as its connections end.
	go func() {
		if err := dp.Run(ctx); err != nil && ctx.Err() == nil {
			log.Error("ipvs drain loop stopped", "err", err)
		}
	}()
	return dp, nil
}
