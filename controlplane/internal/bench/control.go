package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"runtime"
	"runtime/pprof"
	"sync"

	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// Handler serves the control API over client (see the package doc).
func Handler(client kubernetes.Interface, log *slog.Logger) http.Handler {
	c := &control{client: client, log: log}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /apply", c.apply)
	mux.HandleFunc("POST /profile/cpu/start", c.cpuStart)
	mux.HandleFunc("POST /profile/cpu/stop", c.cpuStop)
	mux.HandleFunc("POST /profile/heap", c.heap)
	return mux
}

type control struct {
	client kubernetes.Interface
	log    *slog.Logger

	mu      sync.Mutex
	cpuFile *os.File
}

// apply writes one EndpointSlice: an update, or a create when it is new.
func (c *control) apply(w http.ResponseWriter, r *http.Request) {
	var es discoveryv1.EndpointSlice
	if err := json.NewDecoder(r.Body).Decode(&es); err != nil {
		http.Error(w, "decode EndpointSlice: "+err.Error(), http.StatusBadRequest)
		return
	}
	if err := c.write(r.Context(), &es); err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

func (c *control) write(ctx context.Context, es *discoveryv1.EndpointSlice) error {
	api := c.client.DiscoveryV1().EndpointSlices(es.Namespace)
	_, err := api.Update(ctx, es, metav1.UpdateOptions{})
	if apierrors.IsNotFound(err) {
		_, err = api.Create(ctx, es, metav1.CreateOptions{})
	}
	if err != nil {
		return fmt.Errorf("write EndpointSlice %s/%s: %w", es.Namespace, es.Name, err)
	}
	return nil
}

func (c *control) cpuStart(w http.ResponseWriter, r *http.Request) {
	path := r.URL.Query().Get("path")
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.cpuFile != nil {
		http.Error(w, "a CPU profile is running", http.StatusConflict)
		return
	}
	f, err := os.Create(path)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		_ = f.Close()
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	c.cpuFile = f
	c.log.Info("CPU profile started", "path", path)
	w.WriteHeader(http.StatusNoContent)
}

func (c *control) cpuStop(w http.ResponseWriter, _ *http.Request) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.cpuFile == nil {
		http.Error(w, "no CPU profile is running", http.StatusConflict)
		return
	}
	pprof.StopCPUProfile()
	err := c.cpuFile.Close()
	c.cpuFile = nil
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

func (c *control) heap(w http.ResponseWriter, r *http.Request) {
	f, err := os.Create(r.URL.Query().Get("path"))
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	runtime.GC()
	err = pprof.Lookup("heap").WriteTo(f, 0)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}
