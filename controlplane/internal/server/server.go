package server

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/keepalive"
	"google.golang.org/grpc/reflection"
	"k8s.io/utils/clock"

	"github.com/switchyard-proxy/switchyard/controlplane/internal/cache"
	"github.com/switchyard-proxy/switchyard/controlplane/internal/metrics"
	"github.com/switchyard-proxy/switchyard/controlplane/internal/server/admin"
	"github.com/switchyard-proxy/switchyard/controlplane/internal/server/adminauth"
	"github.com/switchyard-proxy/switchyard/controlplane/internal/server/delta"
	"github.com/switchyard-proxy/switchyard/controlplane/internal/server/sotw"
	"github.com/switchyard-proxy/switchyard/controlplane/internal/server/stream"
	"github.com/switchyard-proxy/switchyard/controlplane/internal/server/wire"
	switchyardv1 "github.com/switchyard-proxy/switchyard/proto/switchyard/v1"
)

// Defaults for zero Config fields.
const (
	DefaultListen        = ":18000"
	DefaultShutdownGrace = 10 * time.Second
	// DefaultMaxConcurrentStreams per connection: an agent needs one.
	DefaultMaxConcurrentStreams = 64
	// DefaultReadBufferBytes is each connection's read buffer.
	DefaultReadBufferBytes = 4 << 10
	// receiveWindow is HTTP/2's default flow-control window, the least
	// gRPC accepts.
	receiveWindow = 64 << 10
)

// Config configures the server. Zero fields take defaults.
type Config struct {
	// Listen is the address Run listens on; DefaultListen when empty.
	Listen string
	// ControlPlaneID identifies this replica in discovery responses.
	ControlPlaneID string
	// CoalesceWindow: how long changes are batched per node before a
	// response; stream.DefaultCoalesceWindow when zero.
	CoalesceWindow time.Duration
	// MaxMessageBytes bounds every message sent and received; larger
	// discovery responses are split. stream.DefaultMaxMessageBytes when
	// zero. Agents must accept messages of this size.
	MaxMessageBytes int
	// TLS, when set, serves TLS. Plaintext only when nil.
	TLS *tls.Config
	// Authorizer decides which node a stream may subscribe as. When nil:
	// stream.NodeCert when TLS asks for client certificates (mTLS), else
	// stream.AllowAll.
	Authorizer stream.Authorizer
	Keepalive  Keepalive
	// ShutdownGrace bounds the graceful stop; DefaultShutdownGrace when zero.
	ShutdownGrace time.Duration
	// Clock defaults to the real clock.
	Clock clock.Clock
	// API is the watch's reachability of the Kubernetes API, which
	// AdminService reports; nil reports none.
	API admin.APIWatch
	// AdminAuth decides who may call AdminService. When nil: open in
	// plaintext, else operators with a certificate in
	// adminauth.DefaultGroup only (no token review).
	AdminAuth *adminauth.Authorizer
	// Settings is where the NodeConfig settings come from, which
	// AdminService reports and streams compare agents' with; nil does
	// neither.
	Settings Settings
	// Rollout is the settings rollout AdminService reports; nil reports
	// none.
	Rollout admin.Rollout
	// Latency is each service's fleet programming latency, which
	// AdminService GetService reports; nil reports none.
	Latency admin.Latency
	// Triggers gives the trigger times streams send beside the changes
	// they bring (network programming latency); nil sends none.
	Triggers stream.TriggerSource
	// Ready, when set, is closed once the first views are published;
	// streams wait for it before they are told apart as a Node's or a
	// stranger's (stream.Strangers).
	Ready <-chan struct{}
	// MaxUnknownNodeStreams bounds the streams open at once for names the
	// control plane has no view for: stream.DefaultMaxStrangers when zero,
	// none when negative.
	MaxUnknownNodeStreams int
}

// Settings is the NodeConfig settings' source; *settings.Source
// implements it.
type Settings interface {
	admin.Settings
	stream.SettingsChecker
}

// Keepalive is the connection policy, sized for thousands of agents that
// keep one stream open for days.
type Keepalive struct {
	// MinPingInterval: clients pinging more often are sent GOAWAY.
	// Default 20s; agents should ping no more often than every 30s.
	MinPingInterval time.Duration
	// Time: the server pings a connection idle this long, to find dead
	// peers. Default 1m.
	Time time.Duration
	// Timeout: a ping unanswered this long closes the connection.
	// Default 20s.
	Timeout time.Duration
	// MaxConnectionAge, when set, recycles connections (spreading agents
	// over replicas again); streams then end and agents reconnect with
	// their versions, receiving only the difference. Zero: never.
	MaxConnectionAge time.Duration
}

func (c Config) withDefaults() Config {
	if c.Listen == "" {
		c.Listen = DefaultListen
	}
	if c.MaxMessageBytes <= 0 {
		c.MaxMessageBytes = stream.DefaultMaxMessageBytes
	}
	if c.ShutdownGrace <= 0 {
		c.ShutdownGrace = DefaultShutdownGrace
	}
	if c.Clock == nil {
		c.Clock = clock.RealClock{}
	}
	if c.AdminAuth == nil {
		c.AdminAuth = adminauth.New(adminauth.Config{Open: c.TLS == nil})
	}
	if c.Authorizer == nil {
		c.Authorizer = stream.AllowAll{}
		if c.TLS != nil && c.TLS.ClientAuth != tls.NoClientCert {
			c.Authorizer = stream.NodeCert{}
		}
	}
	k := &c.Keepalive
	if k.MinPingInterval <= 0 {
		k.MinPingInterval = 20 * time.Second
	}
	if k.Time <= 0 {
		k.Time = time.Minute
	}
	if k.Timeout <= 0 {
		k.Timeout = 20 * time.Second
	}
	return c
}

// Server is the control plane's gRPC server.
type Server struct {
	cfg    Config
	log    *slog.Logger
	grpc   *grpc.Server
	health *health.Server
	delta  *delta.Server
	sotw   *sotw.Server
}

// services health reports on, besides the whole server ("").
var services = []string{"", switchyardv1.DiscoveryService_ServiceDesc.ServiceName, switchyardv1.AdminService_ServiceDesc.ServiceName}

// New builds the server over c. logger and m may be nil (no logs, no
// metrics); m is shared with the compute and watch sides, which observe
// its other collectors.
func New(cfg Config, c *cache.Cache, logger *slog.Logger, m *metrics.Metrics) *Server {
	cfg = cfg.withDefaults()
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	var obs stream.Observer
	if m != nil {
		obs = m
	}
	strangers := &stream.Strangers{
		Known: func(node string) bool { _, ok := c.View(node); return ok },
		Ready: cfg.Ready, Max: cfg.MaxUnknownNodeStreams,
	}
	if m != nil {
		strangers.Observer = m
	}
	opts := stream.Options{
		Strangers:       strangers,
		ControlPlaneID:  cfg.ControlPlaneID,
		CoalesceWindow:  cfg.CoalesceWindow,
		MaxMessageBytes: cfg.MaxMessageBytes,
		Authorizer:      cfg.Authorizer,
		Observer:        obs,
		Clock:           cfg.Clock,
		Logger:          logger,
		Triggers:        cfg.Triggers,
	}
	var adminSettings admin.Settings
	if cfg.Settings != nil {
		opts.Settings, adminSettings = cfg.Settings, cfg.Settings
	}
	s := &Server{
		cfg:    cfg,
		log:    logger,
		grpc:   grpc.NewServer(serverOptions(cfg)...),
		health: health.NewServer(),
		delta:  delta.New(c, opts),
		sotw:   sotw.New(c, opts),
	}
	switchyardv1.RegisterDiscoveryServiceServer(s.grpc, discovery{delta: s.delta, sotw: s.sotw})
	adm := admin.New(c, cfg.API, adminSettings)
	if cfg.Rollout != nil {
		adm.WithRollout(cfg.Rollout)
	}
	if cfg.Latency != nil {
		adm.WithLatency(cfg.Latency)
	}
	switchyardv1.RegisterAdminServiceServer(s.grpc, adm)
	healthpb.RegisterHealthServer(s.grpc, s.health)
	reflection.Register(s.grpc)
	s.SetReady(false)
	return s
}

var (
	_ stream.Observer         = (*metrics.Metrics)(nil)
	_ stream.StrangerObserver = (*metrics.Metrics)(nil)
	_ delta.ResumeObserver    = (*metrics.Metrics)(nil)
)

func serverOptions(cfg Config) []grpc.ServerOption {
	opts := []grpc.ServerOption{
		grpc.MaxRecvMsgSize(cfg.MaxMessageBytes),
		grpc.MaxSendMsgSize(cfg.MaxMessageBytes),
		grpc.MaxConcurrentStreams(DefaultMaxConcurrentStreams),
		grpc.KeepaliveEnforcementPolicy(keepalive.EnforcementPolicy{
			MinTime:             cfg.Keepalive.MinPingInterval,
			PermitWithoutStream: true,
		}),
		grpc.KeepaliveParams(keepalive.ServerParameters{
			Time:                  cfg.Keepalive.Time,
			Timeout:               cfg.Keepalive.Timeout,
			MaxConnectionAge:      cfg.Keepalive.MaxConnectionAge,
			MaxConnectionAgeGrace: cfg.Keepalive.Timeout,
		}),
		// Thousands of mostly idle connections: release each one's write
		// buffer between writes.
		grpc.SharedWriteBuffer(true),
		// and keep a small read buffer for the whole connection's life
		// (gRPC's default is 32 KiB, 156 MiB at 5,000 agents): agents send
		// requests of a few hundred bytes; a larger one (a reconnect's
		// initial_resource_versions) is read past the buffer.
		grpc.ReadBufferSize(DefaultReadBufferBytes),
		// A static receive window (HTTP/2's default size) turns off gRPC's
		// BDP estimator, which answered every agent's ACK after a quiet
		// spell with a PING: a write and a read more per agent per change.
		// Agents only send small requests; the window does not limit them.
		grpc.InitialWindowSize(receiveWindow),
		grpc.InitialConnWindowSize(receiveWindow),
		grpc.WaitForHandlers(true),
		// Discovery responses reference the shared views' bytes instead of
		// marshalling a private copy per stream (package wire).
		grpc.ForceServerCodecV2(wire.New()),
		grpc.ChainUnaryInterceptor(cfg.AdminAuth.Unary()),
	}
	if cfg.TLS != nil {
		opts = append(opts, grpc.Creds(credentials.NewTLS(cfg.TLS)))
	}
	return opts
}

// discovery joins the two wire variants into one DiscoveryService.
type discovery struct {
	switchyardv1.UnimplementedDiscoveryServiceServer
	delta *delta.Server
	sotw  *sotw.Server
}

var _ switchyardv1.DiscoveryServiceServer = discovery{}

func (d discovery) DeltaSnapshots(st grpc.BidiStreamingServer[switchyardv1.DeltaSnapshotsRequest, switchyardv1.DeltaSnapshotsResponse]) error {
	return d.delta.DeltaSnapshots(st)
}

func (d discovery) StreamSnapshots(st grpc.BidiStreamingServer[switchyardv1.StreamSnapshotsRequest, switchyardv1.StreamSnapshotsResponse]) error {
	return d.sotw.StreamSnapshots(st)
}

// SetReady sets the health of the server and its services: SERVING once
// the control plane's views are current, NOT_SERVING otherwise.
func (s *Server) SetReady(ready bool) {
	st := healthpb.HealthCheckResponse_NOT_SERVING
	if ready {
		st = healthpb.HealthCheckResponse_SERVING
	}
	for _, name := range services {
		s.health.SetServingStatus(name, st)
	}
}

// Run listens on cfg.Listen and serves until ctx ends.
func (s *Server) Run(ctx context.Context) error {
	lis, err := new(net.ListenConfig).Listen(ctx, "tcp", s.cfg.Listen)
	if err != nil {
		return fmt.Errorf("listen for gRPC on %s: %w", s.cfg.Listen, err)
	}
	return s.Serve(ctx, lis)
}

// Serve serves on lis until ctx ends, then shuts down: health goes
// NOT_SERVING, discovery streams end with Unavailable, in-flight calls
// finish within ShutdownGrace. It returns nil after a shutdown asked by ctx.
func (s *Server) Serve(ctx context.Context, lis net.Listener) error {
	errc := make(chan error, 1)
	go func() { errc <- s.grpc.Serve(lis) }()
	s.log.Info("serving gRPC", "address", lis.Addr().String(), "tls", s.cfg.TLS != nil)
	select {
	case err := <-errc:
		return fmt.Errorf("serve gRPC on %s: %w", lis.Addr(), err)
	case <-ctx.Done():
	}
	s.shutdown()
	if err := <-errc; err != nil && !errors.Is(err, grpc.ErrServerStopped) {
		return fmt.Errorf("serve gRPC on %s: %w", lis.Addr(), err)
	}
	return nil
}

func (s *Server) shutdown() {
	s.log.Info("shutting down gRPC server", "grace", s.cfg.ShutdownGrace)
	s.health.Shutdown()
	s.delta.Shutdown()
	s.sotw.Shutdown()
	stopped := make(chan struct{})
	go func() {
		s.grpc.GracefulStop()
		close(stopped)
	}()
	t := s.cfg.Clock.NewTimer(s.cfg.ShutdownGrace)
	defer t.Stop()
	select {
	case <-stopped:
	case <-t.C():
		s.log.Warn("graceful stop timed out; closing connections")
		s.grpc.Stop()
		<-stopped
	}
}
