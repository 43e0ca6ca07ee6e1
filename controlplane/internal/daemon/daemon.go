package daemon

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"strings"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"golang.org/x/sync/errgroup"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/utils/clock"

	"github.com/switchyard-proxy/switchyard/certfile"
	"github.com/switchyard-proxy/switchyard/controlplane/internal/apistatus"
	"github.com/switchyard-proxy/switchyard/controlplane/internal/cache"
	"github.com/switchyard-proxy/switchyard/controlplane/internal/fleetlatency"
	"github.com/switchyard-proxy/switchyard/controlplane/internal/metrics"
	"github.com/switchyard-proxy/switchyard/controlplane/internal/model"
	"github.com/switchyard-proxy/switchyard/controlplane/internal/nodeview"
	"github.com/switchyard-proxy/switchyard/controlplane/internal/rollout"
	"github.com/switchyard-proxy/switchyard/controlplane/internal/server"
	"github.com/switchyard-proxy/switchyard/controlplane/internal/server/adminauth"
	"github.com/switchyard-proxy/switchyard/controlplane/internal/settings"
	"github.com/switchyard-proxy/switchyard/controlplane/internal/translate"
	"github.com/switchyard-proxy/switchyard/controlplane/internal/watch"
)

// Options is everything the control plane is configured with.
type Options struct {
	// Kubeconfig path; in-cluster configuration when empty.
	Kubeconfig string
	// RESTConfig, when set, is used instead of Kubeconfig (tests).
	RESTConfig *rest.Config
	// Client, when set, is used instead of RESTConfig and Kubeconfig
	// (benchmarks feed the control plane from an in-memory clientset).
	Client kubernetes.Interface
	// Listen is the gRPC address.
	Listen string
	// MetricsAddr and HealthzAddr are HTTP addresses; empty disables.
	MetricsAddr string
	HealthzAddr string
	// ID names this replica in responses; the hostname when empty.
	ID              string
	CoalesceWindow  time.Duration
	MaxMessageBytes int
	// MaxUnknownNodeStreams bounds the streams open at once for names that
	// are not Nodes (server.Config).
	MaxUnknownNodeStreams int
	TLS                   TLS
	// Insecure serves plaintext gRPC; required when TLS files are absent.
	Insecure bool
	// Views holds the NodeConfig settings sent to every agent: the
	// defaults of the ConfigMap's fields when one is named.
	Views nodeview.Defaults
	// ConfigMapNamespace and ConfigMapName name the ConfigMap whose
	// settings override Views (package settings); an empty name reads
	// none.
	ConfigMapNamespace, ConfigMapName string
	// AdvertiseService is the control plane's own Service, whose ready
	// endpoints every NodeConfig advertises to agents as the replicas to
	// dial (nodeview.Options.AdvertiseService); the zero key advertises
	// nothing.
	AdvertiseService model.ServiceKey
	Resync           time.Duration
	Logger           *slog.Logger
	// AdminGroup is the client-certificate Organization that may call
	// AdminService (adminauth.DefaultGroup when empty).
	AdminGroup string
	// Ready, if set, is called with the gRPC address once serving.
	Ready func(grpcAddr string)
}

// Run runs the control plane until ctx is cancelled.
func Run(ctx context.Context, o Options) error {
	log := o.Logger
	if log == nil {
		log = slog.Default()
	}
	// TLS first: a flag error is reported before any API client is built;
	// the CA Secret's client is the one the watch uses.
	var client kubernetes.Interface
	getClient := func() (kubernetes.Interface, error) {
		var err error
		if client == nil {
			client, err = o.client()
		}
		return client, err
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	certMetrics, err := metrics.RegisterCertificates(reg)
	if err != nil {
		return fmt.Errorf("register metrics: %w", err)
	}
	var tlsClock clock.WithTicker = clock.RealClock{}
	if o.TLS.Clock != nil {
		tlsClock = o.TLS.Clock
	}
	srvTLS, err := o.tlsConfig(ctx, getClient, log, certfile.Options{Clock: tlsClock, Observer: certMetrics, Logger: log.With("component", "tls")})
	if err != nil {
		return err
	}
	tlsCfg := srvTLS.cfg
	if _, err := getClient(); err != nil {
		return err
	}
	m, err := metrics.New(reg)
	if err != nil {
		return fmt.Errorf("register metrics: %w", err)
	}
	id := o.ID
	if id == "" {
		id, _ = os.Hostname()
	}
	api := apistatus.New(apistatus.Options{Logger: log})
	if err := metrics.RegisterAPIStatus(reg, api); err != nil {
		return fmt.Errorf("register metrics: %w", err)
	}
	adminAuth := adminauth.New(adminauth.Config{Open: tlsCfg == nil, Group: o.AdminGroup, Reviewer: adminauth.NewKubeReviewer(client)})
	if tlsCfg == nil {
		log.Warn("plaintext gRPC (--insecure): AdminService, every node's view, is open to whoever reaches " + o.Listen)
	}
	sm, err := metrics.RegisterSettings(reg)
	if err != nil {
		return fmt.Errorf("register metrics: %w", err)
	}
	set := settings.New(settings.Config{Flags: o.Views, Namespace: o.ConfigMapNamespace, Name: o.ConfigMapName, Observer: sm, Logger: log})
	// The fleet's programming latency per service: changes from the
	// watch, ACKs from the cache, read by AdminService GetService.
	latency := fleetlatency.New()
	c := cache.New(cache.WithApplyObserver(latency))
	publish := watch.ObservedPublisher{Publisher: c, Services: latency}
	// Without a ConfigMap there is no rollout (nothing to declare it in)
	// and the driver only reports so.
	driver := rollout.NewDriver(rollout.DriverConfig{
		Replica: id,
		Fleet:   fleet(c),
		Writer:  watch.ProgressWriter{Client: client, Namespace: o.ConfigMapNamespace, Name: o.ConfigMapName},
		Logger:  log.With("component", "rollout"),
	})
	w := watch.New(watch.Config{
		Client: client, Resync: o.Resync, Publisher: publish, Logger: log, API: api, Settings: set, Rollout: driver,
		Views:    nodeview.Options{Defaults: o.Views, AdvertiseService: o.AdvertiseService},
		Recorder: observer{m}, Observer: observer{m},
	})
	srv := server.New(server.Config{
		Listen: o.Listen, ControlPlaneID: id, CoalesceWindow: o.CoalesceWindow,
		MaxMessageBytes: o.MaxMessageBytes, TLS: tlsCfg, API: api, AdminAuth: adminAuth, Settings: set,
		Ready: w.Ready(), MaxUnknownNodeStreams: o.MaxUnknownNodeStreams, Rollout: driver,
		Latency: latency, Triggers: latency,
	}, c, log, m)

	lis, err := listen(o.Listen)
	if err != nil {
		return fmt.Errorf("listen on %s: %w", o.Listen, err)
	}
	g, ctx := errgroup.WithContext(ctx)
	g.Go(func() error { return w.Run(ctx) })
	if len(srvTLS.files) > 0 {
		g.Go(func() error { return certfile.Watch(ctx, tlsClock, 0, srvTLS.files...) })
	}
	g.Go(func() error { return srv.Serve(ctx, lis) })
	g.Go(func() error {
		select {
		case <-ctx.Done():
			return nil
		case <-w.Ready():
		}
		return ignoreCanceled(driver.Run(ctx))
	})
	g.Go(func() error {
		select {
		case <-ctx.Done():
			return nil
		case <-w.Ready():
		}
		srv.SetReady(true)
		log.Info("control plane serving", "grpc", lis.Addr().String(), "replica", id, "advertiseService", advertised(o.AdvertiseService))
		if o.Ready != nil {
			o.Ready(lis.Addr().String())
		}
		return nil
	})
	if o.MetricsAddr != "" {
		mux := http.NewServeMux()
		mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{Registry: reg}))
		g.Go(func() error { return serveHTTP(ctx, o.MetricsAddr, mux) })
	}
	if o.HealthzAddr != "" {
		g.Go(func() error { return serveHTTP(ctx, o.HealthzAddr, healthMux(w.Ready(), api)) })
	}
	err = g.Wait()
	if errors.Is(err, context.Canceled) {
		return nil
	}
	return err
}

// fleet reports the agents the cache serves to the rollout driver.
func fleet(c *cache.Cache) rollout.Fleet {
	return func() map[string]rollout.NodeReport {
		snaps := c.Snapshot()
		out := make(map[string]rollout.NodeReport, len(snaps))
		for _, sn := range snaps {
			st := sn.Status
			out[st.Name] = rollout.NodeReport{
				Connected: st.Connected, SettingsHash: st.Agent.GetSettingsHash(),
				LastNack: st.LastNackTime, NackMessage: st.LastNack.GetMessage(), Datapath: st.Datapath,
			}
		}
		return out
	}
}

func ignoreCanceled(err error) error {
	if errors.Is(err, context.Canceled) {
		return nil
	}
	return err
}

// advertised names the advertised Service for the log; empty when none.
func advertised(k model.ServiceKey) string {
	if k == (model.ServiceKey{}) {
		return ""
	}
	return k.String()
}

func (o Options) client() (kubernetes.Interface, error) {
	if o.Client != nil {
		return o.Client, nil
	}
	cfg := o.RESTConfig
	if cfg == nil {
		var err error
		if o.Kubeconfig == "" {
			cfg, err = rest.InClusterConfig()
		} else {
			cfg, err = clientcmd.BuildConfigFromFlags("", o.Kubeconfig)
		}
		if err != nil {
			return nil, fmt.Errorf("kubernetes client config: %w", err)
		}
	}
	cfg = rest.CopyConfig(cfg)
	cfg.UserAgent = "switchyard-controlplane"
	// The watch is the only client: protobuf halves decode cost.
	cfg.ContentType = "application/vnd.kubernetes.protobuf"
	c, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("kubernetes client: %w", err)
	}
	return c, nil
}

// observer feeds the watch loop's events and translation skips into the
// control-plane metrics.
type observer struct{ m *metrics.Metrics }

func (o observer) InformerEvent(kind, typ string)  { o.m.InformerEvent(kind, typ) }
func (o observer) Computed(d time.Duration, _ int) { o.m.ObserveCompute(d) }

func (o observer) Record(kind translate.Kind, reason translate.Reason) {
	o.m.InputSkipped(string(kind), string(reason))
}

// listen opens the gRPC listener: "unix:///path" is a unix socket (reachable
// from every network namespace that sees the file system), anything else a
// TCP host:port.
func listen(addr string) (net.Listener, error) {
	if path, ok := strings.CutPrefix(addr, "unix://"); ok {
		if path == "" {
			return nil, errors.New("unix:// address without a path")
		}
		return listenUnix(path)
	}
	return net.Listen("tcp", addr)
}

// listenUnix listens on path, first removing a socket file a killed
// process left behind: a restart after kill -9 would otherwise fail with
// "address already in use". A socket someone still serves is left alone.
func listenUnix(path string) (net.Listener, error) {
	l, err := net.Listen("unix", path)
	if err == nil || !errors.Is(err, syscall.EADDRINUSE) {
		return l, err
	}
	if c, derr := net.DialTimeout("unix", path, time.Second); derr == nil {
		c.Close()
		return nil, fmt.Errorf("%s is served by another process: %w", path, err)
	}
	if rerr := os.Remove(path); rerr != nil {
		return nil, fmt.Errorf("remove stale socket %s: %w", path, rerr)
	}
	return net.Listen("unix", path)
}
