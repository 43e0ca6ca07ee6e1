package apiserver

import (
	"log/slog"
	"time"
)

// Defaults for Config fields left zero.
const (
	DefaultServiceCIDR       = "10.96.0.0/16"
	DefaultAuthorizationMode = "RBAC"
	DefaultReadyTimeout      = 60 * time.Second
	DefaultStopGrace         = 10 * time.Second
)

// Config says how to run the server. The zero value is usable.
type Config struct {
	// BinDir holds etcd and kube-apiserver; empty means BinDir().
	BinDir string
	// ServiceCIDR is --service-cluster-ip-range.
	ServiceCIDR string
	// AuthorizationMode is --authorization-mode.
	AuthorizationMode string
	// APIServerArgs are appended to the kube-apiserver command line; a
	// repeated flag overrides the default because the last one wins.
	APIServerArgs []string
	// ReadyTimeout bounds the wait for etcd and kube-apiserver together.
	ReadyTimeout time.Duration
	// StopGrace is how long Stop waits after SIGTERM before SIGKILL.
	StopGrace time.Duration
	// TempDir is the parent of the server's state directory; empty means
	// os.TempDir().
	TempDir string
	// Logger receives progress messages; nil discards them.
	Logger *slog.Logger
}

// Option changes a Config.
type Option func(*Config)

// WithServiceCIDR sets --service-cluster-ip-range.
func WithServiceCIDR(cidr string) Option { return func(c *Config) { c.ServiceCIDR = cidr } }

// WithAuthorizationMode sets --authorization-mode, e.g. "RBAC" or "AlwaysAllow".
func WithAuthorizationMode(mode string) Option {
	return func(c *Config) { c.AuthorizationMode = mode }
}

// WithAPIServerArgs appends raw kube-apiserver flags.
func WithAPIServerArgs(args ...string) Option {
	return func(c *Config) { c.APIServerArgs = append(c.APIServerArgs, args...) }
}

// WithReadyTimeout bounds the start-up wait.
func WithReadyTimeout(d time.Duration) Option { return func(c *Config) { c.ReadyTimeout = d } }

// WithStopGrace sets the SIGTERM-to-SIGKILL grace period.
func WithStopGrace(d time.Duration) Option { return func(c *Config) { c.StopGrace = d } }

// WithBinDir uses binaries from dir instead of BinDir().
func WithBinDir(dir string) Option { return func(c *Config) { c.BinDir = dir } }

// WithLogger sends progress messages to l.
func WithLogger(l *slog.Logger) Option { return func(c *Config) { c.Logger = l } }

// NewConfig applies opts to a zero Config.
func NewConfig(opts ...Option) Config {
	var c Config
	for _, o := range opts {
		o(&c)
	}
	return c
}

func (c Config) withDefaults() Config {
	if c.ServiceCIDR == "" {
		c.ServiceCIDR = DefaultServiceCIDR
	}
	if c.AuthorizationMode == "" {
		c.AuthorizationMode = DefaultAuthorizationMode
	}
	if c.ReadyTimeout <= 0 {
		c.ReadyTimeout = DefaultReadyTimeout
	}
	if c.StopGrace <= 0 {
		c.StopGrace = DefaultStopGrace
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	return c
}
