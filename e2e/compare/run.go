package compare

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/switchyard-proxy/switchyard/e2e/testbed/apiserver"
	"github.com/switchyard-proxy/switchyard/e2e/testbed/netns"
	"github.com/switchyard-proxy/switchyard/e2e/testbed/ruleread"
)

// nodeName is the Node every proxy runs as (one at a time).
const nodeName = "compare-node"

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
	rep := &Report{Started: time.Now(), Command: cfg.Command, Settings: cfg.settings(), Host: hostInfo(),
		LoadAverage: []string{loadAverage()}}
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
	rep.Summaries = summarizeRuns(rep.Records)
	rep.Ratios = computeRatios(rep.Summaries)
	if cfg.DataPath != nil {
		rep.DataPath = summarizeDataPath(rep.Records)
	}
	rep.LoadAverage = append(rep.LoadAverage, loadAverage())
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
	plan, err := netns.NewPlan(cfg.topologySpec(), "plan")
	if err != nil {
		return nil, err
	}
	w, err := newWorkload(api.Client(), size, cfg.EndpointsPerService, log)
	if err != nil {
		return nil, err
	}
	if cfg.DataPath != nil {
		w.carryTraffic(plan, cfg.DataPath.Samples)
	}
	if err := w.create(ctx, nodeName, plan.Nodes[0].IP, cfg.Parallel); err != nil {
		return nil, err
	}
	// Nothing is measured while the build links: it would steal the CPU.
	if _, err := bins.wait(ctx); err != nil {
		return nil, err
	}
	e := &env{cfg: cfg, log: log, dir: dir, api: api, apiAddr: u.Host, work: w, bins: bins}
	// Runs interleave the proxies (all of run 1, then all of run 2), so
	// that a change in the machine's load over the minutes of a size
	// reaches every proxy alike.
	var recs []Record
	timedOut := map[string]int{} // proxy/mode → the run its first sync timed out in
	for run := 1; run <= cfg.Runs; run++ {
		for _, p := range e.proxies() {
			name := p.proxy + "/" + p.mode
			if first, ok := timedOut[name]; ok {
				rec := e.record(p.proxy, p.mode)
				rec.Run, rec.Error = run, fmt.Sprintf("skipped: the first sync timed out in run %d", first)
				recs = append(recs, rec)
				continue
			}
			stopBurn := burnCPU(ctx, cfg.BurnCPUs)
			rec, err := e.measure(ctx, p)
			stopBurn()
			rec.Run = run
			if errors.Is(err, ErrFirstSyncTimeout) {
				e.log.Warn("first sync timed out; recorded, and skipped in later runs", "proxy", p.proxy, "mode", p.mode, "err", err)
				rec.Error, timedOut[name] = err.Error(), run
				recs = append(recs, rec)
				continue
			}
			if err != nil {
				return nil, fmt.Errorf("run %d, %s %s: %w", run, p.proxy, p.mode, err)
			}
			recs = append(recs, rec)
		}
	}
	return recs, nil
}

// proxyRun is one proxy in one mode, measured once (measure).
type proxyRun struct {
	proxy, mode string
	// run starts the proxy in its node namespace, measures it into
	// n.rec and stops it.
	run func(ctx context.Context, n proxyNode) error
}

// proxyNode is a proxy's fresh node namespace and the record and logger
// of its run.
type proxyNode struct {
	topo *netns.Topology
	ns   string
	rec  *Record
	log  *slog.Logger
}

// proxies lists the configured kube-proxy modes, then Switchyard's.
func (e *env) proxies() []proxyRun {
	var out []proxyRun
	if e.cfg.DataPath != nil {
		out = append(out, proxyRun{ProxyNone, ModeDirect, e.runNoProxy})
	}
	for _, mode := range e.cfg.KubeProxyModes {
		out = append(out, proxyRun{ProxyKubeProxy, mode, e.runKubeProxy})
	}
	for _, mode := range e.cfg.SwitchyardModes {
		out = append(out, proxyRun{ProxySwitchyard, mode, e.runSwitchyard})
	}
	return out
}

// measure runs p once in a fresh node namespace, torn down afterwards,
// and returns its record.
func (e *env) measure(ctx context.Context, p proxyRun) (rec Record, err error) {
	rec = e.record(p.proxy, p.mode)
	topo, closeTopo, err := e.newTopology(ctx, &rec)
	if err != nil {
		return rec, err
	}
	defer func() { err = errors.Join(err, closeTopo()) }()
	if e.cfg.DataPath != nil {
		closeSinks, err := startSinks(topo)
		if err != nil {
			return rec, err
		}
		defer func() { err = errors.Join(err, closeSinks()) }()
	}
	err = p.run(ctx, proxyNode{topo: topo, ns: topo.Node(0).NS, rec: &rec, log: e.log.With("proxy", p.proxy, "mode", p.mode)})
	return rec, err
}

// burnCPU keeps n threads busy until the returned func is called: a
// repeatable "under load" for both proxies alike (they compete with the
// same load, never with each other).
func burnCPU(ctx context.Context, n int) func() {
	if n <= 0 {
		return func() {}
	}
	ctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	for range n {
		wg.Go(func() {
			runtime.LockOSThread()
			defer runtime.UnlockOSThread()
			for x := uint64(1); ctx.Err() == nil; {
				for range 1 << 16 {
					x = x*6364136223846793005 + 1442695040888963407
				}
				burnSink.Store(x)
			}
		})
	}
	return func() { cancel(); wg.Wait() }
}

// burnSink keeps the burner's arithmetic from being optimised away.
var burnSink atomic.Uint64

// newTopology creates the node namespace of rec's proxy and, in the
// iptables mode, records its iptables flavour in rec; the returned func
// tears it down (stopping every process in it first) and must be called.
func (e *env) newTopology(ctx context.Context, rec *Record) (*netns.Topology, func() error, error) {
	topo, err := netns.Create(ctx, e.cfg.topologySpec(), netns.Options{Logger: e.log})
	if err != nil {
		return nil, nil, err
	}
	if rec.Mode == "iptables" {
		rec.IptablesFlavour = iptablesVersion(ctx, topo, topo.Node(0).NS)
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

// First-sync sources (Record.FirstSyncSource).
const (
	// SourceMetric: the proxy's own last-sync timestamp, taken when that
	// sync was its only one and a dump right after held every service.
	SourceMetric = "metric"
	// SourceDump: the return of the first dump holding every service.
	SourceDump = "dump"
	// SourceTraffic: every sampled service connected (the userspace
	// mode, which has no rules to dump; Config.DataPath only).
	SourceTraffic = "traffic"
)

// metricPollPause is the pause between two scrapes while waiting for the
// first sync: a scrape costs about a millisecond.
const metricPollPause = 10 * time.Millisecond

// waitFirstSync waits until the rules of every service are in the node
// namespace and returns when they got there. Full dumps are slow to take
// (hundreds of milliseconds at 1,000 services, seconds at 10,000), so it
// polls the proxy's metrics instead until a sync has completed, then
// dumps once: when that sync was the proxy's only one (the sync counter
// is 1 before and after the dump) and the dump holds every cluster IP,
// the rules were there when the proxy's own timestamp says it finished.
// Otherwise it polls dumps, and the time is the first complete dump's.
func (e *env) waitFirstSync(ctx context.Context, d *ruleDumper, alive func() error,
	scrape func(context.Context) (metrics, error)) (time.Time, string, error) {
	t, source, err := e.pollFirstSync(ctx, d, alive, scrape)
	if err != nil && errors.Is(err, context.DeadlineExceeded) && ctx.Err() == nil {
		err = fmt.Errorf("%w: not within %v: %w", ErrFirstSyncTimeout, e.cfg.SyncTimeout, err)
	}
	return t, source, err
}

// ErrFirstSyncTimeout is a proxy whose first sync did not complete within
// Config.SyncTimeout (kube-proxy's iptables mode at 10,000 services: one
// iptables-restore of 60,000 chains ran over 20 minutes on this machine).
// It is a result, not a harness failure: the run is recorded with the
// error and the proxy skipped in later runs of that size.
var ErrFirstSyncTimeout = errors.New("first sync timed out")

func (e *env) pollFirstSync(ctx context.Context, d *ruleDumper, alive func() error,
	scrape func(context.Context) (metrics, error)) (time.Time, string, error) {
	ctx, cancel := context.WithTimeout(ctx, e.cfg.SyncTimeout)
	defer cancel()
	complete := allVIPs(e.work.vips)
	for {
		if before, err := scrape(ctx); err == nil && before.get(metricLastSync) > 0 {
			dump := d.dump(ctx)
			after, err := scrape(ctx)
			if err == nil && complete(dump) && before.get(metricSyncCount) == 1 && after.get(metricSyncCount) == 1 {
				d.last = dump
				return time.Unix(0, int64(before.get(metricLastSync)*1e9)), SourceMetric, nil
			}
			break
		}
		if err := alive(); err != nil {
			return time.Time{}, "", fmt.Errorf("waiting for the first sync: %w", err)
		}
		if err := sleep(ctx, metricPollPause); err != nil {
			return time.Time{}, "", fmt.Errorf("waiting for the first sync: %w", err)
		}
	}
	t, err := d.waitUntil(ctx, "first sync", alive, complete)
	return t, SourceDump, err
}

// measureChanges makes cfg.Changes EndpointSlice changes, one at a time,
// and times each from just before the update until a targeted read of the
// service's rules (serviceRules, located in the first sync's dump) holds
// the new endpoint. scrape, when not nil, reads the proxy's metrics before
// and after each change. It returns the changes and the median cost of a
// read, their resolution.
func (e *env) measureChanges(ctx context.Context, d *ruleDumper, alive func() error,
	scrape func(context.Context) (metrics, error)) ([]Change, float64, error) {
	var out []Change
	var reads []time.Duration
	for range e.cfg.Changes {
		if err := sleep(ctx, e.cfg.ChangeGap); err != nil {
			return nil, 0, err
		}
		var before metrics
		if scrape != nil {
			before, _ = scrape(ctx)
		}
		i, ip := e.work.nextChange()
		svc := workloadNS + "/" + serviceName(i)
		rules, err := d.serviceRules(serviceAddr(i), &reads)
		if err != nil {
			return nil, 0, fmt.Errorf("%s: %w", svc, err)
		}
		// The reads start with the write, not after it returns: a proxy
		// may program the change before the API server's response
		// arrives (its watch event goes out at the same time), and
		// reading only afterwards made the write's round trip (~15 ms
		// here) a floor under every change. The new address cannot be
		// in the rules before the write.
		start := time.Now()
		wrote := make(chan error, 1)
		go func() { wrote <- e.work.applyChange(ctx, nodeName, i, ip) }()
		cctx, cancel := context.WithTimeout(ctx, e.cfg.ChangeTimeout)
		seen, err := rules.waitUntil(cctx, "endpoint "+ip.String(), alive,
			func(out []byte) bool { return ruleread.HoldsAddr(out, ip) })
		cancel()
		err = errors.Join(err, <-wrote, rules.close())
		if err != nil {
			return nil, 0, fmt.Errorf("endpoint %s of %s: %w", ip, svc, err)
		}
		c := Change{Service: svc, NewIP: ip.String(), Seconds: seconds(seen.Sub(start))}
		if scrape != nil {
			c.ProgrammingSeconds = e.programmingAfter(ctx, scrape, before)
		}
		e.log.Info("change programmed", "service", svc, "newIP", c.NewIP, "seconds", c.Seconds,
			"chain", rules.chain, "programmingSeconds", c.ProgrammingSeconds)
		out = append(out, c)
	}
	return out, medianSeconds(reads), nil
}

// started is a proxy running in its node namespace, as measureProxy
// measures it.
type started struct {
	// nftTable is its nftables table, which the rule dumper reads in
	// the nftables mode: "kube-proxy" or "switchyard".
	nftTable string
	// metrics is the address it serves /metrics on, in the namespace.
	metrics string
	// start is what its first sync counts from.
	start time.Time
	// alive reports why it no longer runs, or nil.
	alive func() error
	// pid is the proxy's process (Switchyard: the agent), whose CPU
	// time Churn reads.
	pid int
}

// measureProxy waits for p's first sync in n and records it in n.rec (its
// time from p.start, by the rules and by the proxy's own metric), calls
// synced with that time, then makes and times the changes
// (measureChanges) and records them. It returns the HTTP client that
// reaches the namespace's loopback.
func (e *env) measureProxy(ctx context.Context, n proxyNode, p started, synced func(time.Time)) (*http.Client, error) {
	rec := n.rec
	dumper := newRuleDumper(n.topo, n.ns, rec.Mode, p.nftTable)
	client := nsHTTPClient(n.topo, n.ns)
	scrapeFn := func(ctx context.Context) (metrics, error) {
		return scrape(ctx, client, "http://"+p.metrics+"/metrics")
	}
	if rec.Mode == "userspace" {
		// No rules to read: synced once every sampled service connects.
		if err := e.waitReachable(ctx, n.topo, e.targets(n.topo, false), p.alive); err != nil {
			return client, err
		}
		rec.FirstSyncSeconds, rec.FirstSyncSource = seconds(time.Since(p.start)), SourceTraffic
		synced(time.Now())
		return client, e.measureDataPath(ctx, n, false, p.alive)
	}
	at, source, err := e.waitFirstSync(ctx, dumper, p.alive, scrapeFn)
	if err != nil {
		return client, err
	}
	rec.FirstSyncSeconds, rec.FirstSyncSource = seconds(at.Sub(p.start)), source
	rec.FirstSyncMetricSeconds = firstSyncMetric(ctx, scrapeFn, p.start, n.log)
	synced(at)
	if e.cfg.DataPath != nil {
		rec.PollMedianSeconds = dumper.pollMedian()
		return client, e.measureDataPath(ctx, n, false, p.alive)
	}
	if rec.Changes, rec.ReadMedianSeconds, err = e.measureChanges(ctx, dumper, p.alive, scrapeFn); err != nil {
		return client, err
	}
	if e.cfg.Churn != nil {
		if rec.Churn, err = e.measureChurn(ctx, dumper, p, scrapeFn); err != nil {
			return client, fmt.Errorf("churn: %w", err)
		}
		n.log.Info("churn measured", "changes", rec.Churn.Changes, "cpuMillisPerSecond", rec.Churn.CPUMillisPerSecond,
			"syncs", rec.Churn.Syncs, "lastSeenSeconds", rec.Churn.LastSeenSeconds)
	}
	rec.summarize()
	rec.PollMedianSeconds = dumper.pollMedian()
	return client, nil
}

// firstSyncMetric is the proxy's own view of its first sync: its
// kubeproxy_sync_proxy_rules_last_timestamp_seconds (both proxies export
// it) minus start, or 0 when it cannot be read.
func firstSyncMetric(ctx context.Context, scrape func(context.Context) (metrics, error), start time.Time, log *slog.Logger) float64 {
	m, err := scrape(ctx)
	if err != nil {
		log.Warn("scrape metrics", "err", err)
		return 0
	}
	last := m.get(metricLastSync)
	if last <= 0 {
		return 0
	}
	return seconds(time.Duration((last - float64(start.UnixNano())/1e9) * float64(time.Second)))
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
