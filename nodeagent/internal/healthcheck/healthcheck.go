package healthcheck

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"sort"
	"strconv"
	"sync"
	"time"

	"github.com/switchyard-proxy/switchyard/nodeagent/internal/view"
	switchyardv1 "github.com/switchyard-proxy/switchyard/proto/switchyard/v1"
)

// Service is one service that wants a health-check server.
type Service struct {
	Namespace, Name string
	Port            uint32
	LocalEndpoints  int
}

// Services returns the health-check services of v, sorted by name.
func Services(v *view.View) []Service {
	var out []Service
	for _, name := range v.Names() {
		if svc, ok := serviceOf(v.Resources[name]); ok {
			out = append(out, svc)
		}
	}
	return out
}

// serviceOf is the health-check service of a resource, if it wants one.
func serviceOf(r *switchyardv1.Resource) (Service, bool) {
	sv := r.GetService()
	if sv.GetHealthCheckNodePort() == 0 {
		return Service{}, false
	}
	n := 0
	for _, ep := range sv.GetLocalEndpoints() {
		if ep.GetReady() {
			n++
		}
	}
	return Service{Namespace: sv.GetNamespace(), Name: sv.GetName(), Port: sv.GetHealthCheckNodePort(), LocalEndpoints: n}, true
}

// Config configures Servers.
type Config struct {
	Logger *slog.Logger
	// Listen opens the listener of a port; by default TCP on BindIP:port.
	Listen func(port uint32) (net.Listener, error)
	// BindIP is the address servers bind to by default; empty means all.
	BindIP string
	// ProxyHealthy reports the proxy's health (serviceProxyHealthy);
	// always healthy when nil.
	ProxyHealthy func() bool
}

// Servers runs one HTTP server per health-check node port.
type Servers struct {
	cfg Config

	mu      sync.Mutex
	servers map[uint32]*server
	wg      sync.WaitGroup
}

type server struct {
	srv *http.Server

	mu  sync.Mutex
	svc Service
}

// New returns Servers with none running.
func New(cfg Config) *Servers {
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Listen == nil {
		bind := cfg.BindIP
		cfg.Listen = func(port uint32) (net.Listener, error) {
			return net.Listen("tcp", net.JoinHostPort(bind, strconv.FormatUint(uint64(port), 10)))
		}
	}
	if cfg.ProxyHealthy == nil {
		cfg.ProxyHealthy = func() bool { return true }
	}
	return &Servers{cfg: cfg, servers: map[uint32]*server{}}
}

// Sync makes the running servers match svcs. A port that cannot be opened
// is reported in the returned error; the others are still served.
func (s *Servers) Sync(svcs []Service) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	want := make(map[uint32]Service, len(svcs))
	for _, svc := range svcs {
		if prev, dup := want[svc.Port]; dup {
			s.cfg.Logger.Warn("health-check node port used twice; first service kept", "port", svc.Port,
				"service", prev.Namespace+"/"+prev.Name, "ignored", svc.Namespace+"/"+svc.Name)
			continue
		}
		want[svc.Port] = svc
	}
	for port, srv := range s.servers {
		if _, ok := want[port]; !ok {
			_ = srv.srv.Close()
			delete(s.servers, port)
			s.cfg.Logger.Info("health-check server stopped", "port", port)
		}
	}
	var errs []error
	for _, port := range sortedPorts(want) {
		svc := want[port]
		if srv, ok := s.servers[port]; ok {
			srv.set(svc)
			continue
		}
		if err := s.start(svc); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

func sortedPorts(m map[uint32]Service) []uint32 {
	out := make([]uint32, 0, len(m))
	for p := range m {
		out = append(out, p)
	}
	sort.Slice(out, func(i, j int) bool { return out[i] < out[j] })
	return out
}

func (s *Servers) start(svc Service) error {
	l, err := s.cfg.Listen(svc.Port)
	if err != nil {
		return fmt.Errorf("health-check port %d of %s/%s: %w", svc.Port, svc.Namespace, svc.Name, err)
	}
	srv := &server{svc: svc}
	srv.srv = &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		srv.serve(w, s.cfg.ProxyHealthy())
	}), ReadHeaderTimeout: 5 * time.Second}
	s.servers[svc.Port] = srv
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		if err := srv.srv.Serve(l); err != nil && !errors.Is(err, http.ErrServerClosed) {
			s.cfg.Logger.Error("health-check server failed", "port", svc.Port, "err", err)
		}
	}()
	s.cfg.Logger.Info("health-check server started", "port", svc.Port, "service", svc.Namespace+"/"+svc.Name)
	return nil
}

// Close stops every server and waits for them and their connections.
func (s *Servers) Close() {
	s.mu.Lock()
	servers := make([]*server, 0, len(s.servers))
	for port, srv := range s.servers {
		servers = append(servers, srv)
		delete(s.servers, port)
	}
	s.mu.Unlock()
	for _, srv := range servers {
		shutdown(srv.srv)
	}
	s.wg.Wait()
}

// shutdown closes srv, waiting a little for its connections to finish.
func shutdown(srv *http.Server) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	if err := srv.Shutdown(ctx); err != nil {
		_ = srv.Close()
	}
}

func (srv *server) set(svc Service) {
	srv.mu.Lock()
	defer srv.mu.Unlock()
	srv.svc = svc
}

type body struct {
	Service struct {
		Namespace string `json:"namespace"`
		Name      string `json:"name"`
	} `json:"service"`
	LocalEndpoints      int  `json:"localEndpoints"`
	ServiceProxyHealthy bool `json:"serviceProxyHealthy"`
}

func (srv *server) serve(w http.ResponseWriter, proxyHealthy bool) {
	srv.mu.Lock()
	svc := srv.svc
	srv.mu.Unlock()
	var b body
	b.Service.Namespace, b.Service.Name = svc.Namespace, svc.Name
	b.LocalEndpoints, b.ServiceProxyHealthy = svc.LocalEndpoints, proxyHealthy
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.Header().Set("X-Load-Balancing-Endpoint-Weight", strconv.Itoa(svc.LocalEndpoints))
	code := http.StatusServiceUnavailable
	if svc.LocalEndpoints > 0 && proxyHealthy {
		code = http.StatusOK
	}
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(b)
}
