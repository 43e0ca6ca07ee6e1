package launch

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"
)

var errNotYet = errors.New("not yet")

func startLoopback(t *testing.T, script string) *Process {
	t.Helper()
	p, err := Start(nil, Spec{Name: "sh", Argv: []string{"sh", "-c", script}, Loopback: true,
		LogPath: filepath.Join(t.TempDir(), "sh.log")})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := p.Kill(); err != nil {
			t.Error(err)
		}
	})
	return p
}

// TestWaitReadyExit: a process that dies before it is ready fails the wait
// at once, with its exit and the end of its log.
func TestWaitReadyExit(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	p := startLoopback(t, "echo listening failed: address in use; exit 3")
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	start := time.Now()
	err := WaitReady(ctx, func(context.Context) error { return errNotYet }, p)
	if err == nil {
		t.Fatal("WaitReady: no error")
	}
	for _, want := range []string{"exit status 3", "listening failed: address in use", p.LogPath} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("WaitReady error lacks %q:\n%v", want, err)
		}
	}
	if errors.Is(err, context.DeadlineExceeded) || time.Since(start) > 30*time.Second {
		t.Errorf("WaitReady waited for the deadline: %v", err)
	}
}

// TestWaitReady returns once the probe succeeds, and with ctx's error and
// the probe's last one when the deadline passes first.
func TestWaitReady(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	p := startLoopback(t, "echo started; exec sleep 60")
	calls := 0
	probe := func(context.Context) error {
		if calls++; calls < 3 {
			return errNotYet
		}
		return nil
	}
	if err := WaitReady(t.Context(), probe, p); err != nil || calls != 3 {
		t.Fatalf("WaitReady = %v after %d probes; want nil after 3", err, calls)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 100*time.Millisecond)
	defer cancel()
	err := WaitReady(ctx, func(context.Context) error { return errNotYet }, p)
	if !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), errNotYet.Error()) ||
		!strings.Contains(err.Error(), "started") {
		t.Errorf("WaitReady past the deadline = %v; want the deadline, the probe's error and the log", err)
	}
	if err := p.Alive(); err != nil {
		t.Errorf("Alive while running: %v", err)
	}
	if err := p.Kill(); err != nil {
		t.Fatal(err)
	}
	if err := p.Alive(); err == nil || !strings.Contains(err.Error(), "started") {
		t.Errorf("Alive after Kill = %v; want the exit and the log", err)
	}
}

func TestHTTPReady(t *testing.T) {
	ready := false
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		if !ready {
			http.Error(w, "informers not synced", http.StatusServiceUnavailable)
		}
	}))
	defer srv.Close()
	probe := HTTPReady(srv.Client(), srv.URL+"/readyz")
	if err := probe(t.Context()); err == nil || !strings.Contains(err.Error(), "503") {
		t.Errorf("probe of a 503 = %v", err)
	}
	ready = true
	if err := probe(t.Context()); err != nil {
		t.Errorf("probe of a 200 = %v", err)
	}
}

func TestLoopbackAddrs(t *testing.T) {
	addrs, err := LoopbackAddrs(4)
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for _, a := range addrs {
		if !strings.HasPrefix(a, "127.0.0.1:") || seen[a] {
			t.Errorf("addresses %v: want 4 distinct on 127.0.0.1", addrs)
		}
		seen[a] = true
	}
}
