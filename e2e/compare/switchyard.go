package compare

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"time"

	"github.com/switchyard-proxy/switchyard/e2e/testbed/apiserver"
	"github.com/switchyard-proxy/switchyard/e2e/testbed/netns"
)

// Package paths of the Switchyard commands, built from the workspace.
const (
	controlPlanePkg = "github.com/switchyard-proxy/switchyard/controlplane/cmd/switchyard-controlplane"
	agentPkg        = "github.com/switchyard-proxy/switchyard/nodeagent/cmd/switchyard-agent"
)

// Addresses the agent serves on inside its node namespace.
const (
	agentMetrics = "127.0.0.1:10249"
	agentHealthz = "127.0.0.1:10256"
)

// binaries are the Switchyard commands, built in the background.
type binaries struct {
	done      chan struct{}
	cp, agent string
	err       error
}

// startBuild returns cfg's binaries at once when both are given, else
// starts building them into dir.
func startBuild(ctx context.Context, cfg Config, dir string) *binaries {
	b := &binaries{done: make(chan struct{}), cp: cfg.ControlPlaneBinary, agent: cfg.AgentBinary}
	if b.cp != "" && b.agent != "" {
		close(b.done)
		return b
	}
	go func() {
		defer close(b.done)
		b.cp, b.agent, b.err = buildSwitchyard(ctx, dir, cfg.Logger)
	}()
	return b
}

func (b *binaries) wait(ctx context.Context) (cp, agent string, err error) {
	select {
	case <-b.done:
		return b.cp, b.agent, b.err
	case <-ctx.Done():
		return "", "", context.Cause(ctx)
	}
}

// buildSwitchyard compiles both commands into dir with one go build (as
// e2e/system does, so the build cache is shared).
func buildSwitchyard(ctx context.Context, dir string, log *slog.Logger) (cp, agent string, err error) {
	root, err := apiserver.RepoRoot()
	if err != nil {
		return "", "", err
	}
	start := time.Now()
	log.Info("building", "packages", []string{controlPlanePkg, agentPkg})
	cmd := exec.CommandContext(ctx, "go", "build", "-trimpath", "-o", dir+string(filepath.Separator), controlPlanePkg, agentPkg)
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if b, err := cmd.CombinedOutput(); err != nil {
		return "", "", fmt.Errorf("go build: %w\n%s", err, b)
	}
	log.Info("built", "elapsed", time.Since(start).Round(time.Millisecond))
	return filepath.Join(dir, filepath.Base(controlPlanePkg)), filepath.Join(dir, filepath.Base(agentPkg)), nil
}

// controlPlane is a running switchyard-controlplane in the host namespace
// (it only talks to the API server and serves a unix socket; it never
// touches the kernel's network configuration).
type controlPlane struct {
	cmd     *exec.Cmd
	done    chan struct{}
	logPath string
}

// startControlPlane starts the control plane serving gRPC on socket and
// waits for /readyz (informers synced, views published).
func (e *env) startControlPlane(ctx context.Context, bin, socket string) (*controlPlane, error) {
	healthz, err := freeLoopback()
	if err != nil {
		return nil, err
	}
	cp := &controlPlane{done: make(chan struct{}),
		logPath: filepath.Join(e.dir, fmt.Sprintf("controlplane-%d.log", e.work.services))}
	logf, err := os.Create(cp.logPath)
	if err != nil {
		return nil, err
	}
	defer logf.Close() // the child holds its own descriptor
	cp.cmd = exec.Command(bin, "--kubeconfig", e.api.KubeconfigPath(), "--insecure",
		"--listen", "unix://"+socket, "--healthz-bind-address", healthz, "--metrics-bind-address", "",
		"--coalesce-window", e.cfg.CoalesceWindow.String(), "--id", "cp-compare", "--cluster-cidr", clusterCIDR)
	cp.cmd.Stdout, cp.cmd.Stderr = logf, logf
	cp.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cp.cmd.Start(); err != nil {
		return nil, fmt.Errorf("start control plane: %w", err)
	}
	go func() { _ = cp.cmd.Wait(); close(cp.done) }()
	if err := cp.waitReady(ctx, "http://"+healthz+"/readyz", e.cfg.SyncTimeout); err != nil {
		return nil, errors.Join(err, cp.stop())
	}
	return cp, nil
}

func (cp *controlPlane) waitReady(ctx context.Context, url string, timeout time.Duration) error {
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	client := &http.Client{Timeout: 2 * time.Second}
	for {
		if resp, err := client.Get(url); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		select {
		case <-cp.done:
			return fmt.Errorf("control plane exited; last lines of %s:\n%s", cp.logPath, logTail(cp.logPath, 30))
		case <-deadline.C:
			return fmt.Errorf("control plane not ready after %v; last lines of %s:\n%s", timeout, cp.logPath, logTail(cp.logPath, 30))
		case <-ctx.Done():
			return context.Cause(ctx)
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// stop sends SIGTERM to the control plane's group, SIGKILL after 10 s.
func (cp *controlPlane) stop() error {
	select {
	case <-cp.done:
		return nil
	default:
	}
	_ = syscall.Kill(-cp.cmd.Process.Pid, syscall.SIGTERM)
	select {
	case <-cp.done:
		return nil
	case <-time.After(10 * time.Second):
	}
	_ = syscall.Kill(-cp.cmd.Process.Pid, syscall.SIGKILL)
	select {
	case <-cp.done:
		return nil
	case <-time.After(10 * time.Second):
		return fmt.Errorf("control plane pid %d not reaped after SIGKILL", cp.cmd.Process.Pid)
	}
}

// freeLoopback returns a loopback address with a port free right now.
func freeLoopback() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer l.Close()
	return l.Addr().String(), nil
}

// runSwitchyard starts the control plane (in the host namespace, serving a
// unix socket the node namespace can open) and, once it is ready, one agent
// in the given mode in a fresh node namespace, and measures them. First sync
// counts from the control plane's start: it is what a cold cluster pays,
// comparable to kube-proxy's start, which also lists everything itself.
func (e *env) runSwitchyard(ctx context.Context, mode string) (rec Record, err error) {
	log := e.log.With("proxy", ProxySwitchyard, "mode", mode)
	rec = e.record(ProxySwitchyard, mode)
	topo, closeTopo, err := e.newTopology(ctx)
	if err != nil {
		return rec, err
	}
	defer func() { err = errors.Join(err, closeTopo()) }()
	ns := topo.Node(0).NS
	if mode == "iptables" {
		rec.IptablesFlavour = iptablesVersion(ctx, topo, ns)
	}
	runDir, err := os.MkdirTemp(e.dir, "sy-")
	if err != nil {
		return rec, err
	}
	socket := filepath.Join(runDir, "cp.sock")

	cpBin, agentBin, err := e.bins.wait(ctx)
	if err != nil {
		return rec, err
	}
	start := time.Now()
	cp, err := e.startControlPlane(ctx, cpBin, socket)
	if err != nil {
		return rec, err
	}
	defer func() { err = errors.Join(err, cp.stop()) }()
	rec.ControlPlaneReadySeconds = seconds(time.Since(start))
	log.Info("control plane ready", "seconds", rec.ControlPlaneReadySeconds, "pid", cp.cmd.Process.Pid)

	logPath := filepath.Join(e.dir, fmt.Sprintf("agent-%s-%d.log", mode, rec.Services))
	agentStart := time.Now()
	p, err := e.startAgent(ctx, topo, ns, mode, agentBin, socket, filepath.Join(runDir, "agent"), logPath)
	if err != nil {
		return rec, err
	}
	log.Info("started switchyard-agent", "ns", ns, "pid", p.Pid, "log", logPath)
	alive := func() error {
		select {
		case <-cp.done:
			return fmt.Errorf("control plane exited; last lines of %s:\n%s", cp.logPath, logTail(cp.logPath, 30))
		default:
			return exited(p, "switchyard-agent", logPath)()
		}
	}
	dumper := newRuleDumper(topo, ns, mode, "switchyard")
	synced, err := e.waitFirstSync(ctx, dumper, alive)
	if err != nil {
		return rec, err
	}
	rec.FirstSyncSeconds = seconds(synced.Sub(start))
	rec.AgentSyncSeconds = seconds(synced.Sub(agentStart))
	log.Info("switchyard synced", "seconds", rec.FirstSyncSeconds, "agentSeconds", rec.AgentSyncSeconds)
	client := nsHTTPClient(topo, ns)
	scrapeFn := func(ctx context.Context) (metrics, error) {
		return scrape(ctx, client, "http://"+agentMetrics+"/metrics")
	}
	mon, err := startMonitor(ctx, topo, ns, e.cfg.SyncTimeout)
	if err != nil {
		return rec, err
	}
	if rec.Changes, err = e.measureChanges(ctx, dumper, mon, alive, scrapeFn); err != nil {
		return rec, err
	}
	rec.summarize()
	rec.PollMedianSeconds = dumper.pollMedian()
	if err := e.readSwitchyardMemory(&rec, p.Pid, cp.cmd.Process.Pid); err != nil {
		return rec, err
	}
	log.Info("switchyard measured", "agentRssMiB", strconv.FormatFloat(mibf(rec.RSSBytes), 'f', 1, 64),
		"controlPlaneRssMiB", strconv.FormatFloat(mibf(rec.ControlPlaneRSSBytes), 'f', 1, 64))
	return rec, p.Stop(ctx)
}

// startAgent starts switchyard-agent in mode in ns, connected to the
// control plane's unix socket, logging to logPath.
func (e *env) startAgent(ctx context.Context, topo *netns.Topology, ns, mode, bin, socket, stateDir, logPath string) (*netns.Process, error) {
	logf, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	defer logf.Close() // the child holds its own descriptor
	return topo.Start(ctx, ns, netns.Cmd{Stdout: logf, Stderr: logf, Argv: []string{bin,
		"--mode", mode, "--insecure", "--control-plane", "unix://" + socket, "--node-name", nodeName,
		"--state-dir", stateDir, "--healthz-bind-address", agentHealthz,
		"--metrics-bind-address", agentMetrics, "--min-sync-period", e.cfg.MinSyncPeriod.String(),
	}})
}

func (e *env) readSwitchyardMemory(rec *Record, agentPid, cpPid int) error {
	agent, err := readMemory(agentPid)
	if err != nil {
		return err
	}
	cp, err := readMemory(cpPid)
	if err != nil {
		return err
	}
	rec.RSSBytes, rec.HWMBytes = agent.rss, agent.hwm
	rec.ControlPlaneRSSBytes, rec.ControlPlaneHWMBytes = cp.rss, cp.hwm
	return nil
}
