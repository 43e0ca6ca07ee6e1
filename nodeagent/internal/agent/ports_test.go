package agent

import (
	"log/slog"
	"net"
	"net/http"
	"testing"

	"github.com/switchyard-proxy/switchyard/nodeagent/internal/runtest"
)

// TestPortLetGoAndBoundAgain: a port handed to kube-proxy closes its
// listener, so that kube-proxy can bind the address, and serves it again
// once taken back and free; while another process holds it, it waits.
func TestPortLetGoAndBoundAgain(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	p := newPort("healthz", addr, l, http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.WriteHeader(http.StatusNoContent)
	}), slog.New(slog.NewTextHandler(t.Output(), nil)))
	runtest.Start(t, p.run)
	serves := func() bool {
		resp, err := http.Get("http://" + addr + "/")
		if err != nil {
			return false
		}
		_ = resp.Body.Close()
		return resp.StatusCode == http.StatusNoContent
	}
	runtest.Eventually(t, "serving", serves)

	p.Serve(false) // handed to kube-proxy
	var kubeProxy net.Listener
	runtest.Eventually(t, "the address free for kube-proxy", func() bool {
		kubeProxy, err = net.Listen("tcp", addr)
		return err == nil
	})
	p.Serve(true) // taken back while kube-proxy still holds it
	if p.Addr() != "" {
		t.Errorf("serving %s while kube-proxy holds it", p.Addr())
	}
	if err := kubeProxy.Close(); err != nil {
		t.Fatal(err)
	}
	runtest.Eventually(t, "serving again once free", serves)
}

// TestPortLetGoWhileWaiting: a port whose address kube-proxy held at start
// (the agent then hands the node to kube-proxy and lets it go) is still
// served once the agent takes the node back and the address is free. A
// first version ended the port there, and the agent's liveness probe
// failed until the kubelet restarted it (found on the real-cluster bed).
func TestPortLetGoWhileWaiting(t *testing.T) {
	kubeProxy, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := kubeProxy.Addr().String()
	p := newPort("healthz", addr, nil, http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.WriteHeader(http.StatusNoContent)
	}), slog.New(slog.NewTextHandler(t.Output(), nil)))
	runtest.Start(t, p.run)
	p.Serve(false) // handed to kube-proxy while waiting for the address
	if err := kubeProxy.Close(); err != nil {
		t.Fatal(err)
	}
	p.Serve(true) // taken back
	runtest.Eventually(t, "serving once taken back", func() bool {
		resp, err := http.Get("http://" + addr + "/")
		if err != nil {
			return false
		}
		_ = resp.Body.Close()
		return resp.StatusCode == http.StatusNoContent
	})
}
