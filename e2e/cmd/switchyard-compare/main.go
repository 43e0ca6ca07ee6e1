// Command switchyard-compare runs upstream kube-proxy and Switchyard side by
// side against one real kube-apiserver (package e2e/compare) and writes the
// result as JSON and as a markdown table. It needs root (network
// namespaces), the test bed (`make deps`) and the upstream kube-proxy
// (`BUILD_KUBE_PROXY=1 hack/testbed-build.sh`).
//
//	go run ./e2e/cmd/switchyard-compare -sizes 1000,5000,10000 -runs 3 -out bench/compare.json
//
// writes bench/compare.json and bench/compare.md. With -datapath it
// measures traffic through every proxy instead (and a no-proxy floor):
//
//	go run ./e2e/cmd/switchyard-compare -datapath -sizes 1000 -runs 3 -out bench/datapath.json
package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/switchyard-proxy/switchyard/e2e/cmd/internal/cmdshell"
	"github.com/switchyard-proxy/switchyard/e2e/compare"
)

func main() {
	cmdshell.Exit("switchyard-compare", run())
}

func run() error {
	fs := flag.NewFlagSet("switchyard-compare", flag.ContinueOnError)
	sizes := fs.String("sizes", "1000,5000", "comma-separated numbers of services, one fresh API server each")
	endpoints := fs.Int("endpoints", 0, fmt.Sprintf("endpoints per service (default %d; with -datapath %d)", compare.DefaultEndpointsPerService, compare.DefaultDataPathEndpoints))
	changes := fs.Int("changes", compare.DefaultChanges, "EndpointSlice changes measured per proxy and size")
	modes := fs.String("kube-proxy-modes", "iptables,nftables", "upstream kube-proxy modes to run (none: no kube-proxy)")
	syModes := fs.String("switchyard-modes", "", "switchyard-agent modes to run (default iptables,nftables; with -datapath also userspace; none: no Switchyard)")
	minSync := fs.Duration("min-sync-period", compare.DefaultMinSyncPeriod, "min sync period of both proxies")
	coalesce := fs.Duration("coalesce-window", compare.DefaultCoalesceWindow, "control plane --coalesce-window")
	gap := fs.Duration("change-gap", compare.DefaultChangeGap, "pause before each change (must exceed -min-sync-period)")
	parallel := fs.Int("parallel", compare.DefaultParallel, "concurrent create requests")
	syncTimeout := fs.Duration("sync-timeout", compare.DefaultSyncTimeout, "longest first sync waited for; a proxy that takes longer is recorded as timed out and skipped in later runs of that size")
	runs := fs.Int("runs", 1, "times every proxy is measured per size (interleaved, same API server); the report gives min and median over runs")
	burn := fs.Int("burn-cpus", 0, "CPU-burning threads running beside every proxy while it is measured (a repeatable load; 0: none)")
	out := fs.String("out", "compare.json", "JSON report path; the markdown table goes next to it with .md")
	md := fs.String("markdown", "", "markdown path (default: -out with .md)")
	workDir := fs.String("work-dir", "", "directory for binaries, sockets and logs (default: a temp dir, removed on success)")
	level := fs.String("log-level", "info", "debug|info|warn|error")
	heapDir := fs.String("agent-heap-profiles", "", "directory for a heap profile of every switchyard-agent, taken after its changes, next to its RSS (runs the agent with --profiling; read with go tool pprof)")
	agentLevel := fs.String("agent-log-level", "info", "switchyard-agent --log-level (debug logs every sync; keep the logs with -work-dir)")
	pacing := fs.String("sync-pacing", "adaptive", "switchyard-agent --sync-pacing: adaptive (its default) or bounded (kube-proxy's fixed -min-sync-period)")
	churnRate := fs.Int("churn-rate", 0, "after the timed changes, write this many EndpointSlice changes a second and record each proxy's CPU and syncs under them (0: no churn)")
	churnDur := fs.Duration("churn-duration", compare.DefaultChurnDuration, "-churn-rate: how long changes are written")
	datapath := fs.Bool("datapath", false, "measure the data path (connect latency to ClusterIP and NodePort, new connections/s, bulk throughput) through every proxy and a no-proxy floor, instead of EndpointSlice changes; -endpoints defaults to 3 (one pod each)")
	samples := fs.Int("samples", compare.DefaultSamples, "-datapath: services dialled (first, last, random; also the NodePort ones)")
	connects := fs.Int("connects", compare.DefaultConnects, "-datapath: connects timed per target kind (ClusterIP, NodePort)")
	rateWorkers := fs.Int("rate-workers", compare.DefaultRateWorkers, "-datapath: closed-loop workers of the new-connection run")
	rateDur := fs.Duration("rate-duration", compare.DefaultRateDuration, "-datapath: length of the new-connection run")
	bulkDur := fs.Duration("bulk-duration", compare.DefaultBulkDuration, "-datapath: length of the one-connection bulk transfer")
	if err := fs.Parse(os.Args[1:]); err != nil {
		return cmdshell.Usage(err)
	}
	lv, err := cmdshell.ParseLevel(*level)
	if err != nil {
		return cmdshell.Usage(err)
	}
	log := cmdshell.Logger(lv)
	if !*datapath && *endpoints == 0 {
		*endpoints = compare.DefaultEndpointsPerService
	}
	cfg := compare.Config{
		EndpointsPerService: *endpoints, Changes: *changes, KubeProxyModes: splitList(*modes),
		SwitchyardModes: splitList(*syModes),
		MinSyncPeriod:   *minSync, CoalesceWindow: *coalesce, ChangeGap: *gap, Parallel: *parallel,
		Runs: *runs, BurnCPUs: *burn, AgentLogLevel: *agentLevel, AgentHeapProfiles: *heapDir, SyncTimeout: *syncTimeout,
		WorkDir: *workDir, Logger: log, Command: strings.Join(os.Args, " "), SyncPacing: *pacing,
	}
	if *churnRate > 0 {
		cfg.Churn = &compare.Churn{Rate: *churnRate, Duration: *churnDur}
	}
	if *syModes == "" {
		cfg.SwitchyardModes = nil // the default of the chosen measurement
	}
	if *datapath {
		cfg.DataPath = &compare.DataPath{Samples: *samples, Connects: *connects, RateWorkers: *rateWorkers,
			RateDuration: *rateDur, BulkDuration: *bulkDur}
	}
	for _, s := range splitList(*sizes) {
		n, err := strconv.Atoi(s)
		if err != nil {
			return fmt.Errorf("-sizes: %w", err)
		}
		cfg.Sizes = append(cfg.Sizes, n)
	}
	if *md == "" {
		*md = strings.TrimSuffix(*out, filepath.Ext(*out)) + ".md"
	}
	ctx, stop := cmdshell.SignalContext()
	defer stop()
	start := time.Now()
	rep, err := compare.Run(ctx, cfg)
	if err != nil {
		return err
	}
	if err := writeFile(*out, rep.WriteJSON); err != nil {
		return err
	}
	if err := writeFile(*md, rep.WriteMarkdown); err != nil {
		return err
	}
	log.Info("done", "json", *out, "markdown", *md, "elapsed", time.Since(start).Round(time.Second))
	return nil
}

// splitList splits a comma-separated flag; "none" is the empty list (an
// empty flag means the default).
func splitList(s string) []string {
	if s == "none" {
		return []string{}
	}
	var out []string
	for _, f := range strings.Split(s, ",") {
		if f = strings.TrimSpace(f); f != "" {
			out = append(out, f)
		}
	}
	return out
}

func writeFile(path string, write func(w io.Writer) error) (err error) {
	if dir := filepath.Dir(path); dir != "." {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return err
		}
	}
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, f.Close()) }()
	return write(f)
}
