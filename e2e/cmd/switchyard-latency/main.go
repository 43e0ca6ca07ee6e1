// Command switchyard-latency measures network programming latency on the
// real-cluster bed (e2e/cluster), Switchyard against upstream kube-proxy's
// own DaemonSet (make latency):
//
//	switchyard-latency [-proxies switchyard-iptables,kube-proxy-iptables,…] [-events 100] [-runs 1] [-nodes 2]
//
// For each run and each proxy: bring up a fresh bed, install CoreDNS and
// the proxy (Switchyard from deploy/ through an e2e/cluster overlay in the
// given mode, or kube-proxy as TestKubeProxyOnBed installs it), run the
// scale events of package latency, tear the bed down. After every proxy
// the JSON report and the markdown tables are rewritten, so an
// interrupted run keeps what it measured.
//
// Everything runs inside namespaces the bed creates (root needed); nothing
// changes in this machine's network namespace or its sysctls.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/switchyard-proxy/switchyard/e2e/cluster"
	"github.com/switchyard-proxy/switchyard/e2e/cmd/internal/cmdshell"
	"github.com/switchyard-proxy/switchyard/e2e/latency"
	"github.com/switchyard-proxy/switchyard/e2e/testbed/apiserver"
)

// defaultProxies pairs each kube-proxy mode with Switchyard's, back to
// back, so a ratio compares beds measured minutes apart.
var defaultProxies = []string{"switchyard-iptables", "kube-proxy-iptables", "switchyard-nftables", "kube-proxy-nftables"}

type config struct {
	proxies   []cluster.Proxy
	runs      int
	nodes     int
	overlay   string
	keepDir   bool
	verbose   bool
	outJSON   string
	outMD     string
	measure   latency.Options
	arguments []string
}

func main() {
	const name = "switchyard-latency"
	cfg, err := parseFlags(os.Args[1:])
	if err != nil {
		cmdshell.Exit(name, cmdshell.Usage(err))
	}
	level := slog.LevelInfo
	if cfg.verbose {
		level = slog.LevelDebug
	}
	cmdshell.Run(name, func(ctx context.Context) error { return run(ctx, cmdshell.Logger(level), cfg) })
}

func parseFlags(args []string) (config, error) {
	c := config{arguments: args}
	out := filepath.Join("out", "latency")
	if root, err := apiserver.RepoRoot(); err == nil {
		out = filepath.Join(root, "out", "latency") // ignored by git
	}
	var proxies string
	fs := flag.NewFlagSet("switchyard-latency", flag.ContinueOnError)
	fs.StringVar(&proxies, "proxies", strings.Join(defaultProxies, ","), "comma-separated proxies, each switchyard-<iptables|nftables> or kube-proxy-<iptables|nftables>, measured in this order on a fresh bed each")
	fs.IntVar(&c.runs, "runs", 1, "how many times to measure every proxy (each run, every proxy once, in -proxies order)")
	fs.IntVar(&c.measure.Events, "events", 100, "scale events per proxy and run, alternating one replica more and one less")
	fs.IntVar(&c.measure.Base, "base", 1, "the Deployment's replicas at rest: events go base→base+1→base")
	fs.IntVar(&c.nodes, "nodes", 2, "kubelet nodes per bed (1..6): every event is measured on each")
	fs.DurationVar(&c.measure.Gap, "gap", 2*time.Second, "pause after an event settled, before the next scale call (longer than both proxies' 1 s minimum sync interval)")
	fs.DurationVar(&c.measure.ReadyDelay, "ready-delay", 0, "the pods' readiness probe initial delay (whole seconds): 0 makes pods Ready within about a second of starting, often inside the proxies' 1 s minimum sync interval after the sync that added them as not ready; 2s takes that interval out of the scale-ups")
	fs.DurationVar(&c.measure.ReadPause, "read-pause", 10*time.Millisecond, "pause between two reads of one node's rules")
	fs.DurationVar(&c.measure.EventTimeout, "event-timeout", 2*time.Minute, "how long one event may take before the proxy's measurement stops")
	fs.StringVar(&c.overlay, "overlay", cluster.OverlayBase, "Switchyard's install (e2e/cluster/overlays): base (deploy/ as shipped), plaintext or mtls")
	fs.StringVar(&c.outJSON, "out-json", filepath.Join(out, "latency.json"), "the report: every event on every node, the statistics and the ratios")
	fs.StringVar(&c.outMD, "out-md", filepath.Join(out, "latency.md"), "the markdown tables of the report")
	fs.BoolVar(&c.keepDir, "keep-dir", false, "keep each bed's state directory (every component's log) after teardown")
	fs.BoolVar(&c.verbose, "v", false, "log every event")
	if err := fs.Parse(args); err != nil {
		return c, err
	}
	if fs.NArg() > 0 {
		return c, fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	for name := range strings.SplitSeq(proxies, ",") {
		p, err := cluster.ParseProxy(name)
		if err != nil {
			return c, err
		}
		if p.Mode != "iptables" && p.Mode != "nftables" {
			return c, fmt.Errorf("proxy %s: only the iptables and nftables modes have rules to read", name)
		}
		c.proxies = append(c.proxies, p)
	}
	if c.runs < 1 || c.measure.Events < 1 || c.measure.Base < 1 {
		return c, errors.New("-runs, -events and -base must be at least 1")
	}
	if c.measure.ReadyDelay%time.Second != 0 || c.measure.ReadyDelay < 0 {
		return c, fmt.Errorf("-ready-delay %v: the probe takes whole seconds", c.measure.ReadyDelay)
	}
	return c, nil
}

func run(ctx context.Context, log *slog.Logger, c config) error {
	if os.Geteuid() != 0 {
		return errors.New("needs root: each bed creates network namespaces, mount namespaces and cgroups (never touching this machine's own network namespace or sysctls)")
	}
	for _, p := range []string{c.outJSON, c.outMD} {
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return err
		}
	}
	host, _ := os.Hostname()
	rep := &latency.Report{Started: time.Now(), Host: host, Versions: cluster.Versions(ctx),
		Command: "switchyard-latency " + strings.Join(c.arguments, " "),
		Settings: latency.Settings{Runs: c.runs, Events: c.measure.Events, Nodes: c.nodes, BaseReplicas: c.measure.Base,
			GapSeconds: c.measure.Gap.Seconds(), ReadyDelaySeconds: c.measure.ReadyDelay.Seconds(), ReadPauseSeconds: c.measure.ReadPause.Seconds(), Overlay: c.overlay}}
	for _, p := range c.proxies {
		rep.Settings.Proxies = append(rep.Settings.Proxies, p.Name)
	}
	b, err := newBeds(ctx, log, c)
	if err != nil {
		return err
	}
	var errs []error
	for run := 1; run <= c.runs; run++ {
		for _, p := range c.proxies {
			if err := ctx.Err(); err != nil {
				return errors.Join(append(errs, err)...)
			}
			rec, err := b.measure(ctx, p, run)
			if err != nil {
				log.Error("measurement failed; next proxy", "proxy", p.Name, "run", run, "err", err)
				errs = append(errs, fmt.Errorf("%s run %d: %w", p.Name, run, err))
			}
			if rec.Proxy != "" {
				rep.Records = append(rep.Records, rec)
			}
			if err := write(rep, c); err != nil {
				return err
			}
			fmt.Printf("%s run %d: %d events, p50 %.0f ms, p99 %.0f ms, max %.0f ms\n", p.Name, run, rec.All.N,
				rec.All.P50*1000, rec.All.P99*1000, rec.All.Max*1000)
		}
	}
	fmt.Printf("-> %s, %s\n", c.outJSON, c.outMD)
	return errors.Join(errs...)
}

// write rewrites both outputs from the report so far.
func write(rep *latency.Report, c config) error {
	rep.ElapsedSeconds = time.Since(rep.Started).Round(time.Second).Seconds()
	rep.ComputeRatios()
	if err := rep.WriteJSON(c.outJSON); err != nil {
		return err
	}
	return os.WriteFile(c.outMD, []byte(latency.Markdown(rep)), 0o644)
}
