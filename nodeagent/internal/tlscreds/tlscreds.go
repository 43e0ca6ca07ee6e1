package tlscreds

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"sync"
	"time"

	"google.golang.org/grpc/credentials"
	"k8s.io/utils/clock"

	"github.com/switchyard-proxy/switchyard/certfile"
)

// Config configures a Source.
type Config struct {
	// CAFile is the PEM bundle that verifies the control plane.
	CAFile string
	// CertFile and KeyFile are the client certificate and its key (mTLS;
	// the same file for the kubelet's kubelet-client-current.pem); both
	// empty for none.
	CertFile, KeyFile string
	// WatchInterval is how often Run looks at the files;
	// certfile.DefaultWatchInterval when zero.
	WatchInterval time.Duration
	// MinCheckInterval bounds how often a handshake looks at the files
	// (certfile.Options).
	MinCheckInterval time.Duration
	// Clock is the real clock when nil.
	Clock clock.WithTicker
	// Observer hears every load (metrics); optional.
	Observer certfile.Observer
	// Logger discards when nil.
	Logger *slog.Logger
}

// Source holds the agent's TLS files and makes credentials from them.
type Source struct {
	cfg   Config
	roots *certfile.Bundle
	pair  *certfile.KeyPair // nil without a client certificate
	// reconnect is unbuffered: a send succeeds only while a stream
	// listens.
	reconnect chan struct{}
	// send signals reconnect if someone listens (a seam for tests).
	send func() bool

	mu        sync.Mutex
	presented *tls.Certificate // by the last successful handshake
	asked     *tls.Certificate // the certificate a reconnect was asked for
}

// New loads the files; they must be usable now.
func New(cfg Config) (*Source, error) {
	if cfg.CAFile == "" {
		return nil, errors.New("tlscreds: no CA file")
	}
	if (cfg.CertFile == "") != (cfg.KeyFile == "") {
		return nil, errors.New("tlscreds: a client certificate needs both its file and its key's")
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.RealClock{}
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	opts := certfile.Options{MinCheckInterval: cfg.MinCheckInterval, Clock: cfg.Clock, Observer: cfg.Observer, Logger: cfg.Logger}
	s := &Source{cfg: cfg, reconnect: make(chan struct{})}
	s.send = func() bool {
		select {
		case s.reconnect <- struct{}{}:
			return true
		default:
			return false
		}
	}
	var err error
	if s.roots, err = certfile.NewBundle(cfg.CAFile, opts); err != nil {
		return nil, fmt.Errorf("--ca-file: %w", err)
	}
	if cfg.CertFile != "" {
		if s.pair, err = certfile.NewKeyPair(cfg.CertFile, cfg.KeyFile, opts); err != nil {
			return nil, fmt.Errorf("--cert-file/--key-file: %w", err)
		}
	}
	return s, nil
}

// Credentials returns transport credentials that verify the control
// plane's certificate against serverName, or the dialled host when it is
// empty (tls.Config.ServerName, as gRPC's TLS credentials).
func (s *Source) Credentials(serverName string) credentials.TransportCredentials {
	return &creds{s: s, serverName: serverName}
}

// Reconnect is signalled when the open stream should be replaced by a
// new one, to present a rotated client certificate.
func (s *Source) Reconnect() <-chan struct{} { return s.reconnect }

// Run looks at the files every WatchInterval until ctx ends, and asks
// for a reconnect after a client certificate rotation. It returns nil.
func (s *Source) Run(ctx context.Context) error {
	return certfile.Watch(ctx, s.cfg.Clock, s.cfg.WatchInterval, s)
}

// Check looks at the files now, and asks for a reconnect when the last
// handshake presented a client certificate that is no longer the one in
// use. It reports whether it asked.
func (s *Source) Check() bool {
	s.roots.Check()
	if s.pair == nil {
		return false
	}
	s.pair.Check()
	cur := s.pair.Current()
	// Under mu, so that a handshake that presents cur cannot complete
	// between the comparison and the send: the stream it opens would be
	// asked to reconnect for nothing.
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.presented == nil || s.presented == cur || s.asked == cur {
		return false
	}
	if !s.send() {
		return false // no stream listens: the next handshake presents cur
	}
	s.asked = cur
	s.cfg.Logger.Info("client certificate rotated; reconnecting to present it",
		"file", s.pair.File(), "notAfter", cur.Leaf.NotAfter.UTC().Format(time.RFC3339),
		"previousNotAfter", s.presented.Leaf.NotAfter.UTC().Format(time.RFC3339))
	return true
}

// handshook records the certificate a successful handshake presented.
func (s *Source) handshook(cert *tls.Certificate) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.presented = cert
}

// creds are gRPC transport credentials over a Source.
type creds struct {
	s          *Source
	serverName string
}

var _ credentials.TransportCredentials = (*creds)(nil)

// ClientHandshake runs gRPC's TLS client handshake with a configuration
// built from the files in use now.
func (c *creds) ClientHandshake(ctx context.Context, authority string, raw net.Conn) (net.Conn, credentials.AuthInfo, error) {
	cfg := &tls.Config{RootCAs: c.s.roots.Pool(), ServerName: c.serverName, MinVersion: tls.VersionTLS12}
	var cert *tls.Certificate
	if c.s.pair != nil {
		cert = c.s.pair.Current()
		cfg.GetClientCertificate = func(*tls.CertificateRequestInfo) (*tls.Certificate, error) { return cert, nil }
	}
	conn, info, err := credentials.NewTLS(cfg).ClientHandshake(ctx, authority, raw)
	if err != nil {
		return nil, nil, err
	}
	if cert != nil {
		c.s.handshook(cert)
	}
	return conn, info, nil
}

// ServerHandshake is not for the agent.
func (c *creds) ServerHandshake(net.Conn) (net.Conn, credentials.AuthInfo, error) {
	return nil, nil, errors.New("tlscreds: client credentials only")
}

// Info is gRPC's TLS credentials' (the authority is ServerName when set).
func (c *creds) Info() credentials.ProtocolInfo {
	return credentials.NewTLS(&tls.Config{ServerName: c.serverName}).Info()
}

func (c *creds) Clone() credentials.TransportCredentials {
	return &creds{s: c.s, serverName: c.serverName}
}

// OverrideServerName is gRPC's deprecated hook; it sets the name verified.
func (c *creds) OverrideServerName(name string) error {
	c.serverName = name
	return nil
}
