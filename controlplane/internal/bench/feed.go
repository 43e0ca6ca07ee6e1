package bench

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"time"

	"golang.org/x/sync/errgroup"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/switchyard-proxy/switchyard/controlplane/internal/daemon"
)

// Objects is the file format of the cluster a benchmark loads: JSON with
// the API objects as kube-apiserver would return them.
type Objects struct {
	Services       []corev1.Service            `json:"services"`
	EndpointSlices []discoveryv1.EndpointSlice `json:"endpointSlices"`
	Nodes          []corev1.Node               `json:"nodes"`
}

// Len is the number of objects.
func (o *Objects) Len() int { return len(o.Services) + len(o.EndpointSlices) + len(o.Nodes) }

// ReadObjects reads an Objects file.
func ReadObjects(path string) (*Objects, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("read objects: %w", err)
	}
	defer f.Close()
	var o Objects
	if err := json.NewDecoder(f).Decode(&o); err != nil {
		return nil, fmt.Errorf("decode objects %s: %w", path, err)
	}
	return &o, nil
}

// Config configures Run.
type Config struct {
	// Daemon is the control plane's configuration; its Client is replaced
	// by the fake clientset.
	Daemon daemon.Options
	// Objects is the cluster loaded before the informers start.
	Objects *Objects
	// ControlAddr is the HTTP address of the control API.
	ControlAddr string
	Logger      *slog.Logger
}

// Run loads cfg.Objects into a fake clientset, runs the control plane over
// it and serves the control API until ctx ends.
func Run(ctx context.Context, cfg Config) error {
	if cfg.Objects == nil {
		return errors.New("bench: no objects")
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	begin := time.Now()
	objs := make([]runtime.Object, 0, cfg.Objects.Len())
	for i := range cfg.Objects.Services {
		objs = append(objs, &cfg.Objects.Services[i])
	}
	for i := range cfg.Objects.EndpointSlices {
		objs = append(objs, &cfg.Objects.EndpointSlices[i])
	}
	for i := range cfg.Objects.Nodes {
		objs = append(objs, &cfg.Objects.Nodes[i])
	}
	client := fake.NewSimpleClientset(objs...)
	log.Info("fake clientset loaded", "objects", len(objs), "duration", time.Since(begin))
	cfg.Objects = nil // the tracker holds its own copies

	lis, err := new(net.ListenConfig).Listen(ctx, "tcp", cfg.ControlAddr)
	if err != nil {
		return fmt.Errorf("bench: listen on %s: %w", cfg.ControlAddr, err)
	}
	srv := &http.Server{Handler: Handler(client, log), ReadHeaderTimeout: 5 * time.Second}
	o := cfg.Daemon
	o.Client = client
	o.Logger = log

	g, ctx := errgroup.WithContext(ctx)
	g.Go(func() error { return daemon.Run(ctx, o) })
	g.Go(func() error {
		if err := srv.Serve(lis); err != nil && !errors.Is(err, http.ErrServerClosed) {
			return fmt.Errorf("bench: serve control API: %w", err)
		}
		return nil
	})
	g.Go(func() error {
		<-ctx.Done()
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		return srv.Shutdown(sctx)
	})
	return g.Wait()
}
