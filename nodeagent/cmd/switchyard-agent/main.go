// Command switchyard-agent is Switchyard's node agent: it holds one stream
// to the control plane, programs the node's dataplane with the view it
// receives, acknowledges what it applied, and keeps forwarding with the
// last applied rules when the control plane is gone.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/signal"
	"runtime/debug"
	"strings"
	"syscall"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/switchyard-proxy/switchyard/dataplane/command"
	"github.com/switchyard-proxy/switchyard/nodeagent/internal/agent"
	"github.com/switchyard-proxy/switchyard/nodeagent/internal/leftovers"
	"github.com/switchyard-proxy/switchyard/nodeagent/internal/metrics"
	"github.com/switchyard-proxy/switchyard/nodeagent/internal/peer"
	"github.com/switchyard-proxy/switchyard/nodeagent/internal/syncer"
	"github.com/switchyard-proxy/switchyard/nodeagent/internal/tlscreds"
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
	if os.Getenv("GOGC") == "" && c.GCPercent > 0 {
		debug.SetGCPercent(c.GCPercent)
	}
	if c.Cleanup {
		return cleanup(ctx, c, stdout, logger)
	}
	mode, err := parseMode(c.Mode)
	if err != nil {
		return err
	}
	canaryVIP, err := c.datapathCanary()
	if err != nil {
		return err
	}
	pacing, err := syncer.ParsePacing(c.SyncPacing)
	if err != nil {
		return err
	}
	newDP := dataplanes(ctx, stdout, logger)
	if _, err := newDP(mode); err != nil {
		return err
	}
	others, err := leftovers.New(leftovers.Config{Build: newDP, Logger: logger.With("component", "leftovers")})
	if err != nil {
		return err
	}
	ct, err := conntrackTable(c)
	if err != nil {
		return err
	}
	m := metrics.New()
	tlsFiles, err := tlsSource(c, m, logger.With("component", "tls"))
	if err != nil {
		return err
	}
	// Learnt addresses are IPs: verify the control plane's certificate
	// against the name of the first configured address instead, unless
	// that is an IP address too: then the certificates name their
	// replicas' addresses, and a learnt one is verified against itself.
	learntName := serverName(c.ControlPlanes[0])
	if net.ParseIP(learntName) != nil {
		learntName = ""
	}
	creds, learntCreds := transportCredentials(tlsFiles, ""), transportCredentials(tlsFiles, learntName)
	var kubeProxy syncer.Peer
	if c.CleanupKubeProxy {
		// The hand-over with kube-proxy (package peer, syncer's
		// handover.go): its rules go only after ours forward and while
		// it does not run; while it runs, it has the node.
		kubeProxy = peer.New(peer.Config{HealthzAddress: c.KubeProxyHealthzAddress, Runner: command.ExecRunner{},
			Logger: logger.With("component", "kubeProxy")})
	}
	var credSource agent.CredentialSource
	if tlsFiles != nil {
		credSource = tlsFiles
	}
	a, err := agent.New(agent.Options{
		Credentials:       credSource,
		WatchLinks:        true,
		Metrics:           m,
		NodeName:          c.NodeName,
		AgentVersion:      version,
		ControlPlanes:     c.ControlPlanes,
		DialOptions:       []grpc.DialOption{grpc.WithTransportCredentials(creds)},
		LearntDialOptions: []grpc.DialOption{grpc.WithTransportCredentials(learntCreds)},
		Mode:              mode,
		NewDataplane:      newDP,
		CleanOthers: func(ctx context.Context, inUse switchyardv1.DataplaneMode) error {
			_, err := others.Clean(ctx, inUse)
			return err
		},
		RetryDrain: func(ctx context.Context) error {
			_, err := others.Retry(ctx)
			return err
		},
		Peer:                       kubeProxy,
		StateDir:                   c.StateDir,
		HealthzAddr:                c.HealthzBindAddress,
		MetricsAddr:                c.MetricsBindAddress,
		Profiling:                  c.EnableProfiling,
		HealthCheckBindIP:          c.HealthCheckBindAddress,
		MinSyncPeriod:              c.MinSyncPeriod.Duration,
		SyncPacing:                 pacing,
		SyncPeriod:                 c.SyncPeriod.Duration,
		DriftCheckInterval:         c.DriftCheckInterval.Duration,
		Conntrack:                  ct,
		ConntrackReconcileInterval: c.ConntrackReconcileInterval.Duration,
		DatapathCanary:             canaryVIP,
		// validate keeps it within 1-65535.
		DatapathCanaryPort:    uint16(c.DatapathCanaryPort),
		DatapathProbeInterval: c.DatapathProbeInterval.Duration,
		Logger:                logger,
	})
	if err != nil {
		return err
	}
	logger.Info("switchyard-agent starting", "version", version, "nodeName", c.NodeName, "mode", c.Mode,
		"controlPlanes", c.ControlPlanes, "dialOrder", a.ControlPlanes())
	err = a.Run(ctx)
	logger.Info("switchyard-agent stopped; rules left in place")
	return err
}

// tlsSource loads the TLS files of c, reloaded when they change (the
// kubelet's client certificate rotates); nil for plaintext.
func tlsSource(c Config, m *metrics.Metrics, log *slog.Logger) (*tlscreds.Source, error) {
	if c.Insecure {
		return nil, nil
	}
	return tlscreds.New(tlscreds.Config{
		CAFile: c.CAFile, CertFile: c.CertFile, KeyFile: c.KeyFile,
		Observer: m.Certificates(), Logger: log,
	})
}

// transportCredentials are the credentials of src (plaintext when nil).
// serverName, when not empty, is the name the control plane's
// certificate must carry (tls.Config.ServerName); empty means the
// dialled address's host.
func transportCredentials(src *tlscreds.Source, serverName string) credentials.TransportCredentials {
	if src == nil {
		return insecure.NewCredentials()
	}
	return src.Credentials(serverName)
}

// serverName returns the name gRPC verifies a configured control-plane
// address's certificate against: the host of "host:port" or "[v6]:port",
// of a target's endpoint ("dns:///host:port"), and "localhost" for a unix
// socket, as gRPC's own authority for those.
func serverName(addr string) string {
	if strings.HasPrefix(addr, "unix:") || strings.HasPrefix(addr, "unix-abstract:") {
		return "localhost"
	}
	if i := strings.Index(addr, "://"); i >= 0 {
		rest := addr[i+3:]
		if j := strings.Index(rest, "/"); j >= 0 {
			addr = rest[j+1:]
		}
	}
	if host, _, err := net.SplitHostPort(addr); err == nil {
		return host
	}
	return strings.Trim(addr, "[]")
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
