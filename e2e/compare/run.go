package compare

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"time"

	"github.com/switchyard-proxy/switchyard/e2e/testbed/apiserver"
	"github.com/switchyard-proxy/switchyard/e2e/testbed/netns"
)

// nodeName is the Node every proxy runs as (one at a time).
const nodeName = "compare-node"

// topologySpec is each proxy's throwaway node: one node namespace (plus
// the topology's network, client, control and one pod namespace).
var topologySpec = netns.Spec{Nodes: 1, Prefix: "syc-"}

// Run measures every size in cfg.Sizes: per size a fresh API server and
// workload, then each kube-proxy mode and Switchyard in turn, each in its
// own node namespace. Everything it starts is stopped before it returns.
func Run(ctx context.Context, cfg Config) (_ *Report, err error) {
	cfg = cfg.withDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	log := cfg.Logger
	if cfg.KubeProxyBinary == "" {
		if cfg.KubeProxyBinary, err = KubeProxyPath(); err != nil {
			return nil, err
		}
	}
	rep := &Report{Started: time.Now(), Command: cfg.Command, Settings: cfg.settings(), Host: hostInfo()}
	if rep.KubeProxyVersion, err = kubeProxyVersion(ctx, cfg.KubeProxyBinary); err != nil {
		return nil, err
	}
	dir := cfg.WorkDir
	if dir == "" {
		if dir, err = os.MkdirTemp("", "switchyard-compare-"); err != nil {
			return nil, err
		}
		defer func() {
			if err != nil {
				log.Info("run failed; keeping logs", "dir", dir)
				return
			}
			err = os.RemoveAll(dir)
		}()
	}
	// The build (tens of seconds of linking on a busy machine) overlaps the
	// first API server start and workload creation, never a measurement.
	bctx, cancelBuild := context.WithCancel(ctx)
	bins := startBuild(bctx, cfg, dir)
	defer func() { cancelBuild(); _, _ = bins.wait(context.Background()) }()
	for _, size := range cfg.Sizes {
		recs, err := runSize(ctx, cfg, dir, size, bins)
		if err != nil {
			return nil, fmt.Errorf("%d services: %w", size, err)
		}
		rep.Records = append(rep.Records, recs...)
	}
	rep.Ratios = computeRatios(rep.Records)
	rep.ElapsedSeconds = seconds(time.Since(rep.Started))
	return rep, nil
}

// env is what every proxy run of one size shares.
type env struct {
	cfg     Config
	log     *slog.Logger
	dir     string
	api     *apiserver.Server
	apiAddr string // host:port of the API server on the host's loopback
	work    *workload
	bins    *binaries
}

func runSize(ctx context.Context, cfg Config, dir string, size int, bins *binaries) (_ []Record, err error) {
	log := cfg.Logger.With("services", size)
	log.Info("starting etcd and kube-apiserver")
	api, err := apiserver.StartContext(ctx, apiserver.Config{Logger: log})
	if err != nil {
		return nil, err
	}
	defer func() { err = errors.Join(err, api.Stop()) }()
	u, err := url.Parse(api.URL())
	if err != nil {
		return nil, err
	}
	plan, err := netns.NewPlan(topologySpec, "plan")
	if err != nil {
		return nil, err
	}
	w, err := newWorkload(api.Client(), size, cfg.EndpointsPerService, log)
	if err != nil {
		return nil, err
	}
	if err := w.create(ctx, nodeName, plan.Nodes[0].IP, cfg.Parallel); err != nil {
		return nil, err
	}
	// Nothing is measured while the build links: it would steal the CPU.
	if _, err := bins.wait(ctx); err != nil {
		return nil, err
	}
	e := &env{cfg: cfg, log: log, dir: dir, api: api, apiAddr: u.Host, work: w, bins: bins}
	var recs []Record
	for _, mode := range cfg.KubeProxyModes {
		rec, err := e.runKubeProxy(ctx, mode)
		if err != nil {
			return nil, fmt.Errorf("kube-proxy %s: %w", mode, err)
		}
		recs = append(recs, rec)
	}
	for _, mode := range cfg.SwitchyardModes {
		rec, err := e.runSwitchyard(ctx, mode)
		if err != nil {
			return nil, fmt.Errorf("switchyard %s: %w", mode, err)
		}
		recs = append(recs, rec)
	}
	return recs, nil
}

// newTopology creates a proxy's node namespace; the returned func tears
// it down (stopping every process in it first) and must be called.
func (e *env) newTopology(ctx context.Context) (*netns.Topology, func() error, error) {
	topo, err := netns.Create(ctx, topologySpec, netns.Options{Logger: e.log})
	if err != nil {
		return nil, nil, err
	}
	return topo, func() error {
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
		defer cancel()
		return topo.Close(cctx)
	}, nil
}

// record starts a Record of this size.
func (e *env) record(proxy, mode string) Record {
	return Record{Services: e.work.services, EndpointsPerSvc: e.work.endpoints, Proxy: proxy, Mode: mode}
}

// waitFirstSync waits until the rules of every service are in the node
// namespace and returns when that was seen.
func (e *env) waitFirstSync(ctx context.Context, d *ruleDumper, alive func() error) (time.Time, error) {
	ctx, cancel := context.WithTimeout(ctx, e.cfg.SyncTimeout)
	defer cancel()
	return d.waitUntil(ctx, "first sync", alive, allVIPs(e.work.vips))
}

// measureChanges makes cfg.Changes EndpointSlice changes, one at a time,
// and times each until its new endpoint's rule is committed in the node
// namespace, as the rule monitor reports it (a dump poll when the monitor is
// gone). A dump afterwards confirms the rule is there. scrape, when not nil,
// reads the proxy's metrics before and after each change.
func (e *env) measureChanges(ctx context.Context, d *ruleDumper, mon *ruleMonitor, alive func() error,
	scrape func(context.Context) (metrics, error)) ([]Change, error) {
	var out []Change
	for range e.cfg.Changes {
		if err := sleep(ctx, e.cfg.ChangeGap); err != nil {
			return nil, err
		}
		var before metrics
		if scrape != nil {
			before, _ = scrape(ctx)
		}
		i, ip := e.work.nextChange()
		svc := workloadNS + "/" + serviceName(i)
		seenCh := mon.watch(ip.String())
		start := time.Now()
		if err := e.work.applyChange(ctx, nodeName, i, ip); err != nil {
			return nil, err
		}
		cctx, cancel := context.WithTimeout(ctx, e.cfg.ChangeTimeout)
		c, err := e.waitChange(cctx, d, mon, seenCh, alive, ip.String(), start)
		cancel()
		mon.unwatch(ip.String())
		if err != nil {
			return nil, fmt.Errorf("endpoint %s of %s: %w", ip, svc, err)
		}
		c.Service = svc
		if scrape != nil {
			c.ProgrammingSeconds = e.programmingAfter(ctx, scrape, before)
		}
		e.log.Info("change programmed", "service", svc, "newIP", c.NewIP, "seconds", c.Seconds,
			"source", c.Source, "programmingSeconds", c.ProgrammingSeconds)
		out = append(out, c)
	}
	return out, nil
}

// waitChange waits for the monitor to see ip (or, if the monitor is gone,
// for a dump to hold it) and confirms it with a dump.
func (e *env) waitChange(ctx context.Context, d *ruleDumper, mon *ruleMonitor, seenCh <-chan time.Time,
	alive func() error, ip string, start time.Time) (Change, error) {
	c := Change{NewIP: ip, Source: "monitor"}
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	var seen time.Time
	for seen.IsZero() {
		select {
		case seen = <-seenCh:
		case <-tick.C:
			if err := alive(); err != nil {
				return c, err
			}
			if err := mon.alive(); err != nil {
				e.log.Warn("rule monitor gone; polling dumps", "err", err)
				c.Source = "poll"
				var perr error
				if seen, perr = d.waitUntil(ctx, "endpoint "+ip, alive, hasIP(ip)); perr != nil {
					return c, perr
				}
			}
		case <-ctx.Done():
			return c, context.Cause(ctx)
		}
	}
	c.Seconds = seconds(seen.Sub(start))
	if _, err := d.waitUntil(ctx, "confirming endpoint "+ip, alive, hasIP(ip)); err != nil {
		return c, err
	}
	return c, nil
}

// programmingAfter waits briefly for the proxy to record the change's
// network-programming latency (it observes after its sync returns) and
// returns it, or 0.
func (e *env) programmingAfter(ctx context.Context, scrape func(context.Context) (metrics, error), before metrics) float64 {
	deadline := time.Now().Add(3 * time.Second)
	for {
		after, err := scrape(ctx)
		if err == nil && after.get(metricProgrammingCount) > before.get(metricProgrammingCount) {
			return programmingDelta(before, after)
		}
		if time.Now().After(deadline) || sleep(ctx, 100*time.Millisecond) != nil {
			return 0
		}
	}
}

func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return context.Cause(ctx)
	case <-t.C:
		return nil
	}
}

// exited returns an alive func for a process: an error once it is gone.
func exited(p *netns.Process, name, logPath string) func() error {
	return func() error {
		select {
		case <-p.Done():
			return fmt.Errorf("%s exited (%v); last lines of %s:\n%s", name, p.Err(), logPath, logTail(logPath, 30))
		default:
			return nil
		}
	}
}

func kubeProxyVersion(ctx context.Context, bin string) (string, error) {
	out, err := exec.CommandContext(ctx, bin, "--version").Output()
	if err != nil {
		return "", fmt.Errorf("%s --version: %w", bin, err)
	}
	return strings.TrimPrefix(strings.TrimSpace(string(out)), "Kubernetes "), nil
}

func hostInfo() string {
	kernel, _ := os.ReadFile("/proc/sys/kernel/osrelease")
	return fmt.Sprintf("%d CPUs, kernel %s", runtime.NumCPU(), strings.TrimSpace(string(kernel)))
}

// iptablesVersion is `iptables --version` inside the node namespace (never
// in the host's), e.g. "iptables v1.8.9 (nf_tables)".
func iptablesVersion(ctx context.Context, topo *netns.Topology, ns string) string {
	out, err := topo.Exec(ctx, ns, "iptables", "--version")
	if err != nil {
		return "unknown"
	}
	return strings.TrimSpace(string(out))
}
