package system

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/switchyard-proxy/switchyard/e2e/testbed/launch"
)

// controlPlane is one switchyard-controlplane replica.
type controlPlane struct {
	index   int
	id      string
	socket  string           // unix socket path
	target  string           // unix:// + socket
	healthz string           // host:port on loopback
	metrics string           // host:port on loopback
	logPath string           // output of every start, appended
	conn    *grpc.ClientConn // AdminService client (survives restarts)

	proc *launch.Process // nil until started
}

// controlPlaneStopGrace is how long Close lets a replica shut down before
// SIGKILL.
const controlPlaneStopGrace = 10 * time.Second

// newControlPlane picks replica i's addresses and dials its socket lazily.
func (c *Cluster) newControlPlane(i int) (*controlPlane, error) {
	addrs, err := launch.LoopbackAddrs(2)
	if err != nil {
		return nil, err
	}
	id := "cp-" + strconv.Itoa(i)
	cp := &controlPlane{
		index:   i,
		id:      id,
		socket:  filepath.Join(c.dir, id+".sock"),
		healthz: addrs[0],
		metrics: addrs[1],
		logPath: filepath.Join(c.dir, id+".log"),
	}
	cp.target = "unix://" + cp.socket
	creds := insecure.NewCredentials()
	if c.PKI != nil {
		admin, err := c.PKI.OperatorCert("switchyard-e2e-admin")
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
	mode := c.mode
	if cp.index < len(c.modes) {
		mode = c.modes[cp.index]
	}
	if mode != "" {
		args = append(args, "--mode", mode)
	}
	if c.settings {
		args = append(args, "--config-map", SettingsNamespace+"/"+SettingsConfigMap)
	}
	if c.PKI == nil {
		return append(args, "--insecure")
	}
	return append(args, "--tls-cert-file", c.PKI.ServerCert, "--tls-private-key-file", c.PKI.ServerKey,
		"--client-ca-file", c.PKI.CAFile)
}

// startControlPlane runs replica cp in this namespace (launch.Spec
// Loopback: it serves gRPC on its unix socket and HTTP on loopback), and
// waits for /readyz. A socket file left by a killed process is removed
// first: the control plane does not unlink a stale socket itself, so a
// restart on the same path would fail with EADDRINUSE.
func (c *Cluster) startControlPlane(ctx context.Context, cp *controlPlane) error {
	if err := os.Remove(cp.socket); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	c.log.Info("starting switchyard-controlplane", "id", cp.id, "listen", cp.target)
	p, err := launch.Start(nil, launch.Spec{Name: "switchyard-controlplane " + cp.id, Loopback: true,
		Argv: append([]string{c.bin.ControlPlane}, c.controlPlaneArgs(cp)...), LogPath: cp.logPath})
	if err != nil {
		return err
	}
	cp.proc = p
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	return launch.WaitReady(ctx, launch.HTTPReady(nil, "http://"+cp.healthz+"/readyz"), p)
}

// KillControlPlane sends SIGKILL to replica i (kill -9: no graceful
// shutdown, its socket file stays) and waits until it is reaped.
func (c *Cluster) KillControlPlane(i int) error {
	cp := c.cps[i]
	if cp.proc == nil {
		return fmt.Errorf("control plane %s was never started", cp.id)
	}
	if err := cp.proc.Kill(); err != nil {
		return err
	}
	c.log.Info("killed switchyard-controlplane", "id", cp.id, "pid", cp.proc.Pid())
	return nil
}

// SetMode changes the --mode of control planes started from now on (the
// dataplane mode every NodeConfig imposes; "" leaves the agents' own):
// kill and restart a replica to switch the agents at runtime.
func (c *Cluster) SetMode(mode string) { c.mode = mode }

// RestartControlPlane starts replica i again with the same flags and
// socket, after KillControlPlane, and waits until it is ready.
func (c *Cluster) RestartControlPlane(ctx context.Context, i int) error {
	cp := c.cps[i]
	if cp.proc != nil && cp.proc.Alive() == nil {
		return fmt.Errorf("control plane %s is still running", cp.id)
	}
	return c.startControlPlane(ctx, cp)
}

// stopControlPlane stops cp gracefully (SIGTERM, 10 s, then SIGKILL).
func (c *Cluster) stopControlPlane(cp *controlPlane) {
	if cp.conn != nil {
		cp.conn.Close()
	}
	if cp.proc == nil {
		return
	}
	if err := cp.proc.Stop(controlPlaneStopGrace); err != nil {
		c.log.Debug("control plane stop", "id", cp.id, "err", err)
	}
}

// ControlPlaneMetrics scrapes replica i's /metrics and returns every sample
// by its series, e.g. `switchyard_controlplane_connected_agents{rpc="delta"}`.
func (c *Cluster) ControlPlaneMetrics(ctx context.Context, i int) (map[string]float64, error) {
	m, err := launch.ScrapeMetrics(ctx, nil, "http://"+c.cps[i].metrics+"/metrics")
	if err != nil {
		return nil, fmt.Errorf("control plane %s: %w", c.cps[i].id, err)
	}
	return m, nil
}

// ControlPlaneReadyz returns replica i's /readyz status code and body.
func (c *Cluster) ControlPlaneReadyz(ctx context.Context, i int) (int, string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+c.cps[i].healthz+"/readyz", nil)
	if err != nil {
		return 0, "", err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, "", fmt.Errorf("control plane %s /readyz: %w", c.cps[i].id, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body), err
}

// ControlPlaneExited is closed once replica i (its current process) has
// exited and been reaped, however it died.
func (c *Cluster) ControlPlaneExited(i int) <-chan struct{} { return c.cps[i].proc.Done() }

// ControlPlaneLogs returns replica 0's output so far.
func (c *Cluster) ControlPlaneLogs() string { return c.ControlPlaneLogsAt(0) }

// ControlPlaneLogsAt returns replica i's output so far, over its restarts.
func (c *Cluster) ControlPlaneLogsAt(i int) string { return readLog(c.cps[i].logPath) }

// ControlPlaneTargets returns every replica's gRPC target, in order.
func (c *Cluster) ControlPlaneTargets() []string {
	out := make([]string, len(c.cps))
	for i, cp := range c.cps {
		out[i] = cp.target
	}
	return out
}
