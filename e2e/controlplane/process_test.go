package controlplane_test

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/switchyard-proxy/switchyard/e2e/testbed/apiserver"
)

// buildOnce builds a command of the workspace into a temp dir, once per
// test binary; the Go build cache makes repeats cheap.
var builds sync.Map // package path → *buildResult

type buildResult struct {
	once sync.Once
	path string
	err  error
}

func build(t *testing.T, pkg string) string {
	t.Helper()
	v, _ := builds.LoadOrStore(pkg, &buildResult{})
	b := v.(*buildResult)
	b.once.Do(func() {
		dir, err := os.MkdirTemp("", "switchyard-bin-")
		if err != nil {
			b.err = err
			return
		}
		b.path = filepath.Join(dir, filepath.Base(pkg))
		cmd := exec.Command("go", "build", "-trimpath", "-o", b.path, pkg)
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
		if out, err := cmd.CombinedOutput(); err != nil {
			b.err = fmt.Errorf("go build %s: %v\n%s", pkg, err, out)
		}
	})
	if b.err != nil {
		t.Fatal(b.err)
	}
	return b.path
}

// freeAddr returns a loopback address with a port free right now.
func freeAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

// controlPlane is a running switchyard-controlplane process.
type controlPlane struct {
	grpc, healthz, metrics string
	cmd                    *exec.Cmd
	logs                   *bytes.Buffer
}

// startControlPlane runs the real binary against the test bed's API server
// and waits for /readyz.
func startControlPlane(t *testing.T, api *apiserver.Server, extra ...string) *controlPlane {
	t.Helper()
	bin := build(t, "github.com/switchyard-proxy/switchyard/controlplane/cmd/switchyard-controlplane")
	cp := &controlPlane{grpc: freeAddr(t), healthz: freeAddr(t), metrics: freeAddr(t), logs: &bytes.Buffer{}}
	args := append([]string{
		"--kubeconfig", api.KubeconfigPath(), "--insecure", "--listen", cp.grpc,
		"--healthz-bind-address", cp.healthz, "--metrics-bind-address", cp.metrics,
		"--coalesce-window", "20ms", "--id", "cp-test", "--log-level", "debug",
	}, extra...)
	cp.cmd = exec.Command(bin, args...)
	cp.cmd.Stdout, cp.cmd.Stderr = cp.logs, cp.logs
	cp.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cp.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cp.cmd.Wait() }()
	t.Cleanup(func() {
		_ = cp.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-exited:
		case <-time.After(10 * time.Second):
			_ = syscall.Kill(-cp.cmd.Process.Pid, syscall.SIGKILL)
			<-exited
		}
		if t.Failed() {
			t.Logf("control plane logs:\n%s", cp.logs.String())
		}
	})
	deadline := time.Now().Add(30 * time.Second)
	for {
		select {
		case err := <-exited:
			t.Fatalf("control plane exited: %v\n%s", err, cp.logs.String())
		default:
		}
		if resp, err := http.Get("http://" + cp.healthz + "/readyz"); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return cp
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("control plane not ready after 30s\n%s", cp.logs.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// eventually polls cond until it holds or ctx's deadline passes.
func eventually(ctx context.Context, t *testing.T, what string, cond func() bool) {
	t.Helper()
	for !cond() {
		select {
		case <-ctx.Done():
			t.Fatalf("timed out waiting for %s", what)
		case <-time.After(20 * time.Millisecond):
		}
	}
}
