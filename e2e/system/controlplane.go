package system

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
)

// controlPlane is one switchyard-controlplane replica.
type controlPlane struct {
	id      string
	socket  string // unix socket path
	target  string // unix:// + socket
	healthz string // host:port on loopback
	metrics string // host:port on loopback
	logs    *lockedBuffer
	conn    *grpc.ClientConn // AdminService client (survives restarts)

	cmd  *exec.Cmd
	done chan struct{} // closed when cmd was reaped
}

// newControlPlane picks replica i's addresses and dials its socket lazily.
func (c *Cluster) newControlPlane(i int) (*controlPlane, error) {
	healthz, err := freeLoopback()
	if err != nil {
		return nil, err
	}
	metrics, err := freeLoopback()
	if err != nil {
		return nil, err
	}
	cp := &controlPlane{
		id:      "cp-" + strconv.Itoa(i),
		socket:  filepath.Join(c.dir, "cp-"+strconv.Itoa(i)+".sock"),
		healthz: healthz,
		metrics: metrics,
		logs:    &lockedBuffer{},
	}
	cp.target = "unix://" + cp.socket
	creds := insecure.NewCredentials()
	if c.PKI != nil {
		admin, err := c.PKI.ClientCert("switchyard-e2e-admin")
		if err != nil {
			return nil, err
		}
		creds = credentials.NewTLS(c.PKI.ClientTLS(&admin))
	}
	if cp.conn, err = grpc.NewClient(cp.target, grpc.WithTransportCredentials(creds)); err != nil {
		return nil, err
	}
	return cp, nil
}

// args is the replica's command line.
func (c *Cluster) controlPlaneArgs(cp *controlPlane) []string {
	args := []string{"--kubeconfig", c.API.KubeconfigPath(), "--listen", cp.target,
		"--healthz-bind-address", cp.healthz, "--metrics-bind-address", cp.metrics,
		"--coalesce-window", "20ms", "--id", cp.id, "--cluster-cidr", clusterCIDR}
	if c.mode != "" {
		args = append(args, "--mode", c.mode)
	}
	if c.PKI == nil {
		return append(args, "--insecure")
	}
	return append(args, "--tls-cert-file", c.PKI.ServerCert, "--tls-private-key-file", c.PKI.ServerKey,
		"--client-ca-file", c.PKI.CAFile)
}

// startControlPlane runs replica cp in this namespace, serving gRPC on its
// unix socket, and waits for /readyz. A socket file left by a killed
// process is removed first: the control plane does not unlink a stale
// socket itself, so a restart on the same path would fail with EADDRINUSE.
func (c *Cluster) startControlPlane(ctx context.Context, cp *controlPlane) error {
	if err := os.Remove(cp.socket); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	c.log.Info("starting switchyard-controlplane", "id", cp.id, "listen", cp.target)
	cmd := exec.Command(c.bin.ControlPlane, c.controlPlaneArgs(cp)...)
	cmd.Stdout, cmd.Stderr = cp.logs, cp.logs
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start control plane %s: %w", cp.id, err)
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	cp.cmd, cp.done = cmd, done
	deadline := time.NewTimer(30 * time.Second)
	defer deadline.Stop()
	for {
		if resp, err := http.Get("http://" + cp.healthz + "/readyz"); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		select {
		case <-done:
			return fmt.Errorf("control plane %s exited: %s", cp.id, cp.logs.String())
		case <-deadline.C:
			return fmt.Errorf("control plane %s not ready after 30s: %s", cp.id, cp.logs.String())
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// KillControlPlane sends SIGKILL to replica i (kill -9: no graceful
// shutdown, its socket file stays) and waits until it is reaped.
func (c *Cluster) KillControlPlane(i int) error {
	cp := c.cps[i]
	if cp.cmd == nil {
		return fmt.Errorf("control plane %s was never started", cp.id)
	}
	if err := syscall.Kill(-cp.cmd.Process.Pid, syscall.SIGKILL); err != nil && !errors.Is(err, syscall.ESRCH) {
		return fmt.Errorf("kill control plane %s: %w", cp.id, err)
	}
	<-cp.done
	c.log.Info("killed switchyard-controlplane", "id", cp.id, "pid", cp.cmd.Process.Pid)
	return nil
}

// RestartControlPlane starts replica i again with the same flags and
// socket, after KillControlPlane, and waits until it is ready.
func (c *Cluster) RestartControlPlane(ctx context.Context, i int) error {
	cp := c.cps[i]
	select {
	case <-cp.done:
	default:
		return fmt.Errorf("control plane %s is still running", cp.id)
	}
	return c.startControlPlane(ctx, cp)
}

// stopControlPlane stops cp gracefully (SIGTERM, 10 s, then SIGKILL).
func (c *Cluster) stopControlPlane(cp *controlPlane) {
	if cp.conn != nil {
		cp.conn.Close()
	}
	if cp.cmd == nil {
		return
	}
	select {
	case <-cp.done:
		return
	default:
	}
	_ = cp.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-cp.done:
	case <-time.After(10 * time.Second):
		_ = syscall.Kill(-cp.cmd.Process.Pid, syscall.SIGKILL)
		<-cp.done
	}
}

// ControlPlaneMetrics scrapes replica i's /metrics and returns every sample
// by its series, e.g. `switchyard_controlplane_connected_agents{rpc="delta"}`.
func (c *Cluster) ControlPlaneMetrics(ctx context.Context, i int) (map[string]float64, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+c.cps[i].metrics+"/metrics", nil)
	if err != nil {
		return nil, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, fmt.Errorf("scrape %s: %w", c.cps[i].id, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("scrape %s: %s", c.cps[i].id, resp.Status)
	}
	out := map[string]float64{}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		if i < 0 {
			continue
		}
		v, err := strconv.ParseFloat(line[i+1:], 64)
		if err != nil {
			continue
		}
		out[line[:i]] = v
	}
	return out, sc.Err()
}

// ControlPlaneLogs returns replica 0's output so far.
func (c *Cluster) ControlPlaneLogs() string { return c.ControlPlaneLogsAt(0) }

// ControlPlaneLogsAt returns replica i's output so far, over its restarts.
func (c *Cluster) ControlPlaneLogsAt(i int) string { return c.cps[i].logs.String() }

// ControlPlaneTargets returns every replica's gRPC target, in order.
func (c *Cluster) ControlPlaneTargets() []string {
	out := make([]string, len(c.cps))
	for i, cp := range c.cps {
		out[i] = cp.target
	}
	return out
}
