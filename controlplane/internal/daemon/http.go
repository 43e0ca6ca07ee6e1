package daemon

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strings"
	"time"

	"github.com/switchyard-proxy/switchyard/controlplane/internal/apistatus"
)

// healthMux answers /healthz (the process runs) and /readyz (caches synced
// and first views published). An API outage after that leaves /readyz at
// 200 — the replica still serves agents the views it has, and a failing
// probe would only take it out of its Service — but its body says since
// when and why views may be stale.
func healthMux(ready <-chan struct{}, api *apistatus.Tracker) *http.ServeMux {
	mux := http.NewServeMux()
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) {
		_, _ = w.Write([]byte("ok\n"))
	})
	mux.HandleFunc("/readyz", func(w http.ResponseWriter, _ *http.Request) {
		select {
		case <-ready:
			_, _ = w.Write([]byte("ok\n" + staleDetail(api)))
		default:
			http.Error(w, "informers not synced", http.StatusServiceUnavailable)
		}
	})
	return mux
}

// staleDetail is /readyz's line per unavailable resource during an API
// outage; "" otherwise. The health port is reachable by anyone who can
// reach the node (kubelet probes carry no credential), so the detail names
// the resources and durations but never the error text, which can carry
// the API server's address and TLS or authentication details: that is in
// the control plane's log and in AdminService ListNodes (api), for
// operators only.
func staleDetail(api *apistatus.Tracker) string {
	since := api.Outage()
	if since.IsZero() {
		return ""
	}
	var b strings.Builder
	fmt.Fprintf(&b, "warning: Kubernetes API unreachable for %s: views may be stale\n", api.Elapsed(since).Round(time.Second))
	for _, r := range api.Snapshot() {
		if r.State == apistatus.Unavailable {
			fmt.Fprintf(&b, "  %s: unavailable for %s\n", r.Resource, api.Elapsed(r.Since).Round(time.Second))
		}
	}
	return b.String()
}

// serveHTTP serves h on addr until ctx is cancelled.
func serveHTTP(ctx context.Context, addr string, h http.Handler) error {
	lis, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("listen on %s: %w", addr, err)
	}
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 5 * time.Second}
	go func() {
		<-ctx.Done()
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(sctx)
	}()
	if err := srv.Serve(lis); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("serve %s: %w", addr, err)
	}
	return nil
}
