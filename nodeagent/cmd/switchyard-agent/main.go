// Command switchyard-agent is Switchyard's node agent: it holds one stream
// to the control plane, programs the node's dataplane with the view it
// receives, acknowledges what it applied, and keeps forwarding with the
// last applied rules when the control plane is gone.
package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"strings"
	"sync"
	"syscall"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/switchyard-proxy/switchyard/dataplane"
	"github.com/switchyard-proxy/switchyard/dataplane/conntrack"
	"github.com/switchyard-proxy/switchyard/dataplane/dryrun"
	"github.com/switchyard-proxy/switchyard/dataplane/iptables"
	"github.com/switchyard-proxy/switchyard/nodeagent/internal/agent"
	switchyardv1 "github.com/switchyard-proxy/switchyard/proto/switchyard/v1"
)

// version is set at build time with -ldflags "-X main.version=...".
var version = "dev"

func main() {
	// SIGTERM: close the stream, leave the rules in place.
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	if err != nil {
		if errors.Is(err, flag.ErrHelp) {
			os.Exit(0)
		}
		fmt.Fprintln(os.Stderr, "switchyard-agent:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	c, err := parseConfig(args, stderr, os.Getenv)
	if err != nil {
		return err
	}
	logger, err := newLogger(stderr, c.LogLevel, c.LogFormat)
	if err != nil {
		return err
	}
	mode, err := parseMode(c.Mode)
	if err != nil {
		return err
	}
	newDP := dataplanes(stdout, logger)
	if _, err := newDP(mode); err != nil {
		return err
	}
	creds, err := transportCredentials(c)
	if err != nil {
		return err
	}
	a, err := agent.New(agent.Options{
		NodeName:          c.NodeName,
		AgentVersion:      version,
		ControlPlanes:     c.ControlPlanes,
		DialOptions:       []grpc.DialOption{grpc.WithTransportCredentials(creds)},
		Mode:              mode,
		NewDataplane:      newDP,
		StateDir:          c.StateDir,
		HealthzAddr:       c.HealthzBindAddress,
		MetricsAddr:       c.MetricsBindAddress,
		HealthCheckBindIP: c.HealthCheckBindAddress,
		MinSyncPeriod:     c.MinSyncPeriod.Duration,
		SyncPeriod:        c.SyncPeriod.Duration,
		Logger:            logger,
	})
	if err != nil {
		return err
	}
	logger.Info("switchyard-agent starting", "version", version, "nodeName", c.NodeName, "mode", c.Mode, "controlPlanes", c.ControlPlanes)
	err = a.Run(ctx)
	logger.Info("switchyard-agent stopped; rules left in place")
	return err
}

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

func modeName(m switchyardv1.DataplaneMode) string {
	for name, v := range modes {
		if v == m {
			return name
		}
	}
	return m.String()
}

// dataplanes builds the dataplane of a mode, once: the flag check at start
// and the agent (and a later switch back to the mode) share one instance,
// so a mode's kernel handles are opened once. dry-run and iptables exist so
// far. Building one touches no kernel state: iptables detects its flavour
// on the first Apply, in the namespace the agent runs in (the node's).
func dataplanes(stdout io.Writer, log *slog.Logger) func(switchyardv1.DataplaneMode) (dataplane.Dataplane, error) {
	var mu sync.Mutex
	built := map[switchyardv1.DataplaneMode]dataplane.Dataplane{}
	return func(m switchyardv1.DataplaneMode) (dataplane.Dataplane, error) {
		mu.Lock()
		defer mu.Unlock()
		if dp, ok := built[m]; ok {
			return dp, nil
		}
		var dp dataplane.Dataplane
		switch m {
		case switchyardv1.DataplaneMode_DATAPLANE_MODE_DRY_RUN:
			dp = dryrun.New(stdout)
		case switchyardv1.DataplaneMode_DATAPLANE_MODE_IPTABLES:
			var err error
			if dp, err = newIPTables(log); err != nil {
				return nil, err
			}
		default:
			return nil, fmt.Errorf("mode %s is not available yet", modeName(m))
		}
		built[m] = dp
		return dp, nil
	}
}

func newIPTables(log *slog.Logger) (dataplane.Dataplane, error) {
	h, err := netlink.NewHandle(unix.NETLINK_NETFILTER)
	if err != nil {
		return nil, fmt.Errorf("iptables mode: netlink handle for conntrack: %w", err)
	}
	dp, err := iptables.New(iptables.Config{
		Runner:    iptables.ExecRunner{},
		Conntrack: conntrack.Netlink{Handle: h},
		Logger:    log.With("mode", "iptables"),
	})
	if err != nil {
		h.Close()
		return nil, fmt.Errorf("iptables mode: %w", err)
	}
	return dp, nil
}

func transportCredentials(c Config) (credentials.TransportCredentials, error) {
	if c.Insecure {
		return insecure.NewCredentials(), nil
	}
	pem, err := os.ReadFile(c.CAFile)
	if err != nil {
		return nil, fmt.Errorf("--ca-file: %w", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("--ca-file %s: no PEM certificate", c.CAFile)
	}
	cfg := &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
	if c.CertFile != "" {
		cert, err := tls.LoadX509KeyPair(c.CertFile, c.KeyFile)
		if err != nil {
			return nil, fmt.Errorf("--cert-file/--key-file: %w", err)
		}
		cfg.Certificates = []tls.Certificate{cert}
	}
	return credentials.NewTLS(cfg), nil
}

func newLogger(w io.Writer, level, format string) (*slog.Logger, error) {
	var l slog.Level
	if err := l.UnmarshalText([]byte(level)); err != nil {
		return nil, fmt.Errorf("--log-level %q: %w", level, err)
	}
	opts := &slog.HandlerOptions{Level: l}
	switch strings.ToLower(format) {
	case "text":
		return slog.New(slog.NewTextHandler(w, opts)), nil
	case "json":
		return slog.New(slog.NewJSONHandler(w, opts)), nil
	default:
		return nil, fmt.Errorf("--log-format %q: want text or json", format)
	}
}
