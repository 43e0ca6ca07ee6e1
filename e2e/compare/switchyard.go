package compare

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/switchyard-proxy/switchyard/e2e/testbed/launch"
	"github.com/switchyard-proxy/switchyard/e2e/testbed/netns"
)

// Addresses the agent serves on inside its node namespace.
const (
	agentMetrics = "127.0.0.1:10249"
	agentHealthz = "127.0.0.1:10256"
)

// binaries are the Switchyard commands, built in the background.
type binaries struct {
	done chan struct{}
	bin  launch.Binaries
	err  error
}

// startBuild returns cfg's binaries at once when both are given, else
// starts building them into dir.
func startBuild(ctx context.Context, cfg Config, dir string) *binaries {
	b := &binaries{done: make(chan struct{}), bin: launch.Binaries{ControlPlane: cfg.ControlPlaneBinary, Agent: cfg.AgentBinary}}
	if b.bin.ControlPlane != "" && b.bin.Agent != "" {
		close(b.done)
		return b
	}
	go func() {
		defer close(b.done)
		b.bin, b.err = launch.BuildSwitchyard(ctx, dir, cfg.Logger)
	}()
	return b
}

func (b *binaries) wait(ctx context.Context) (launch.Binaries, error) {
	select {
	case <-b.done:
		return b.bin, b.err
	case <-ctx.Done():
		return launch.Binaries{}, context.Cause(ctx)
	}
}

// controlPlaneStopGrace is how long the control plane may take to shut
// down before SIGKILL.
const controlPlaneStopGrace = 10 * time.Second

// agentStopGrace is the agent's.
const agentStopGrace = 2 * time.Second

// startControlPlane starts the control plane in the host namespace (it only
// talks to the API server and serves a unix socket; it never touches the
// kernel's network configuration) serving gRPC on socket, and waits for
// /readyz (informers synced, views published).
func (e *env) startControlPlane(ctx context.Context, bin, socket string) (*launch.Process, error) {
	addrs, err := launch.LoopbackAddrs(1)
	if err != nil {
		return nil, err
	}
	healthz := addrs[0]
	p, err := launch.Start(nil, launch.Spec{Name: "switchyard-controlplane", Loopback: true,
		LogPath: filepath.Join(e.dir, fmt.Sprintf("controlplane-%d.log", e.work.services)),
		Argv: []string{bin, "--kubeconfig", e.api.KubeconfigPath(), "--insecure",
			"--listen", "unix://" + socket, "--healthz-bind-address", healthz, "--metrics-bind-address", "",
			"--coalesce-window", e.cfg.CoalesceWindow.String(), "--id", "cp-compare", "--cluster-cidr", clusterCIDR}})
	if err != nil {
		return nil, err
	}
	rctx, cancel := context.WithTimeout(ctx, e.cfg.SyncTimeout)
	defer cancel()
	if err := launch.WaitReady(rctx, launch.HTTPReady(nil, "http://"+healthz+"/readyz"), p); err != nil {
		return nil, errors.Join(err, p.Stop(controlPlaneStopGrace))
	}
	return p, nil
}

// runSwitchyard starts the control plane (in the host namespace, serving a
// unix socket the node namespace can open) and, once it is ready, one agent
// in the given mode in a fresh node namespace, and measures them. First sync
// counts from the control plane's start: it is what a cold cluster pays,
// comparable to kube-proxy's start, which also lists everything itself.
func (e *env) runSwitchyard(ctx context.Context, n proxyNode) (err error) {
	rec, log, topo, ns, mode := n.rec, n.log, n.topo, n.ns, n.rec.Mode
	runDir, err := os.MkdirTemp(e.dir, "sy-")
	if err != nil {
		return err
	}
	socket := filepath.Join(runDir, "cp.sock")

	bins, err := e.bins.wait(ctx)
	if err != nil {
		return err
	}
	start := time.Now()
	cp, err := e.startControlPlane(ctx, bins.ControlPlane, socket)
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, cp.Stop(controlPlaneStopGrace)) }()
	rec.ControlPlaneReadySeconds = seconds(time.Since(start))
	log.Info("control plane ready", "seconds", rec.ControlPlaneReadySeconds, "pid", cp.Pid())

	if mode == "userspace" {
		// The userspace proxy binds the service addresses themselves,
		// which reach it only where they are local: the service range as
		// a local route, as deploy/components/userspace sets on a node.
		if _, err := topo.Exec(ctx, ns, "ip", "route", "add", "local", topo.Plan().ServiceCIDR.String(), "dev", "lo"); err != nil {
			return fmt.Errorf("local route for the userspace mode: %w", err)
		}
	}
	logPath := filepath.Join(e.dir, fmt.Sprintf("agent-%s-%d.log", mode, rec.Services))
	agentStart := time.Now()
	p, err := e.startAgent(topo, ns, mode, bins.Agent, socket, filepath.Join(runDir, "agent"), logPath)
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, p.Stop(agentStopGrace)) }()
	log.Info("started switchyard-agent", "ns", ns, "pid", p.Pid(), "log", logPath)
	sy := started{nftTable: "switchyard", metrics: agentMetrics, start: start, alive: func() error { return errors.Join(cp.Alive(), p.Alive()) }, pid: p.Pid()}
	client, err := e.measureProxy(ctx, n, sy, func(synced time.Time) {
		rec.AgentSyncSeconds = seconds(synced.Sub(agentStart))
		log.Info("switchyard synced", "seconds", rec.FirstSyncSeconds, "agentSeconds", rec.AgentSyncSeconds)
	})
	if err != nil {
		return err
	}
	if err := e.readSwitchyardMemory(rec, p.Pid(), cp.Pid()); err != nil {
		return err
	}
	if e.cfg.AgentHeapProfiles != "" {
		path := filepath.Join(e.cfg.AgentHeapProfiles, fmt.Sprintf("agent-%s-%d-run%d.pb.gz", mode, rec.Services, rec.Run))
		if err := fetchTo(ctx, client, "http://"+agentMetrics+"/debug/pprof/heap", path); err != nil {
			return fmt.Errorf("agent heap profile: %w", err)
		}
		log.Info("agent heap profile", "path", path)
	}
	log.Info("switchyard measured", "agentRssMiB", strconv.FormatFloat(mibf(rec.RSSBytes), 'f', 1, 64),
		"controlPlaneRssMiB", strconv.FormatFloat(mibf(rec.ControlPlaneRSSBytes), 'f', 1, 64))
	return nil
}

// startAgent starts switchyard-agent in mode in ns, connected to the
// control plane's unix socket, logging to logPath.
func (e *env) startAgent(topo *netns.Topology, ns, mode, bin, socket, stateDir, logPath string) (*launch.Process, error) {
	return launch.Start(topo.Guard(), launch.Spec{Name: "switchyard-agent", NetNS: "/run/netns/" + ns, LogPath: logPath,
		Argv: []string{bin,
			"--mode", mode, "--insecure", "--control-plane", "unix://" + socket, "--node-name", nodeName,
			"--state-dir", stateDir, "--healthz-bind-address", agentHealthz,
			"--metrics-bind-address", agentMetrics, "--min-sync-period", e.cfg.MinSyncPeriod.String(),
			"--sync-pacing", cmp.Or(e.cfg.SyncPacing, "adaptive"),
			"--log-level", e.cfg.AgentLogLevel,
			fmt.Sprintf("--profiling=%v", e.cfg.AgentHeapProfiles != ""),
		}})
}

// fetchTo writes the body of a GET of url to path.
func fetchTo(ctx context.Context, c *http.Client, url, path string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	resp, err := c.Do(req)
	if err != nil {
		return fmt.Errorf("get %s: %w", url, err)
	}
	defer func() { _ = resp.Body.Close() }()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("get %s: %s", url, resp.Status)
	}
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return fmt.Errorf("read %s: %w", url, err)
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	return os.WriteFile(path, body, 0o644)
}

func (e *env) readSwitchyardMemory(rec *Record, agentPid, cpPid int) error {
	agent, err := launch.ReadMemory(agentPid)
	if err != nil {
		return err
	}
	cp, err := launch.ReadMemory(cpPid)
	if err != nil {
		return err
	}
	rec.RSSBytes, rec.HWMBytes = agent.RSS, agent.Peak
	rec.ControlPlaneRSSBytes, rec.ControlPlaneHWMBytes = cp.RSS, cp.Peak
	return nil
}
