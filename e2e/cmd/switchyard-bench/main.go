// Command switchyard-bench runs the benchmark harness of issue 9 (package
// e2e/bench): fan-out of one control plane to many simulated agents, over
// an in-memory feed (path fake) and the test bed's kube-apiserver (path
// apiserver), in delta and state-of-the-world mode; and the API-server
// load of one control plane versus one kube-proxy per node. It writes one
// JSON record per run and a markdown table.
package main

import (
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"k8s.io/klog/v2"

	"github.com/switchyard-proxy/switchyard/e2e/bench"
	"github.com/switchyard-proxy/switchyard/e2e/cmd/internal/cmdshell"
)

func main() {
	cmdshell.Exit("switchyard-bench", run(os.Args[1:], os.Stderr))
}

type options struct {
	suites, paths, modes, sizes, agents, apiAgents string
	loadAgents                                     string
	reps, sotwChanges                              int
	fan                                            bench.FanoutOptions
	load                                           bench.APILoadOptions
	profileAgents                                  int
	outJSON, outMD, inJSON, workDir                string
	bins                                           bench.Binaries
	logLevel                                       string
}

func parseFlags(args []string, out io.Writer) (options, error) {
	var o options
	fs := flag.NewFlagSet("switchyard-bench", flag.ContinueOnError)
	fs.SetOutput(out)
	fs.StringVar(&o.suites, "suites", "fanout", "comma-separated: fanout, apiload")
	fs.StringVar(&o.paths, "paths", "fake", "fan-out feed paths: fake (in-memory clientset in the control plane), apiserver (test bed)")
	fs.StringVar(&o.modes, "modes", "delta,sotw", "discovery modes: delta (DeltaSnapshots), sotw (StreamSnapshots)")
	fs.StringVar(&o.sizes, "sizes", "1000x10,10000x10", "cluster sizes, services x endpoints per service")
	fs.StringVar(&o.agents, "agents", "10,100,1000", "agent counts for path fake")
	fs.StringVar(&o.apiAgents, "apiserver-agents", "100", "agent counts for path apiserver")
	fs.IntVar(&o.reps, "reps", 3, "runs of each configuration")
	fs.IntVar(&o.fan.Changes, "changes", 10, "changes per run")
	fs.IntVar(&o.sotwChanges, "sotw-changes", 0, "changes per state-of-the-world run when > 0 (each sends every agent its whole view)")
	fs.DurationVar(&o.fan.ApplyDelay, "apply-delay", time.Millisecond, "simulated apply time before an agent ACKs a batch")
	fs.DurationVar(&o.fan.Coalesce, "coalesce-window", 100*time.Millisecond, "control plane --coalesce-window (its default is 100ms)")
	fs.IntVar(&o.fan.Wave, "connect-wave", 100, "agents that dial at once during the initial sync")
	fs.DurationVar(&o.fan.ChangeTimeout, "change-timeout", 5*time.Minute, "bound on one change reaching every agent")
	fs.DurationVar(&o.fan.ReadyTimeout, "ready-timeout", 10*time.Minute, "bound on control-plane start and initial sync")
	fs.StringVar(&o.fan.CPUProfile, "cpuprofile", "", "control-plane CPU profile over the change phase of path-fake runs with -profile-agents agents (first run of each size and mode); the file name gets a suffix per run")
	fs.StringVar(&o.fan.MemProfile, "memprofile", "", "control-plane heap profile after those runs' change phase")
	fs.StringVar(&o.fan.SyncCPUProfile, "sync-cpuprofile", "", "control-plane CPU profile over the initial sync of the runs -cpuprofile applies to")
	fs.StringVar(&o.fan.SyncMemProfile, "sync-memprofile", "", "control-plane heap profile right after those runs' initial sync")
	fs.IntVar(&o.profileAgents, "profile-agents", 1000, "agent count of the runs -cpuprofile and -memprofile apply to")
	fs.StringVar(&o.loadAgents, "apiload-agents", "10,100,1000", "API load: agent counts behind one control plane, and kube-proxy-shaped informer sets")
	fs.IntVar(&o.load.KubeProxies, "kube-proxies", 20, "API load: real kube-proxy processes (0 skips; each in its own network namespace, needs root)")
	fs.StringVar(&o.load.KubeProxyBin, "kube-proxy-bin", "", "kube-proxy binary; the test bed's bin dir when empty")
	fs.StringVar(&o.outJSON, "out-json", "bench.jsonl", "raw records, one JSON object per run (appended)")
	fs.StringVar(&o.outMD, "out-md", "bench.md", "markdown table of every record in -out-json")
	fs.StringVar(&o.inJSON, "render", "", "only render: read these comma-separated JSON files and write -out-md")
	fs.StringVar(&o.workDir, "workdir", "", "directory for binaries, logs and object files; a temporary one when empty")
	fs.StringVar(&o.bins.ControlPlane, "controlplane-bin", "", "prebuilt switchyard-controlplane; built when empty")
	fs.StringVar(&o.bins.BenchCP, "benchcp-bin", "", "prebuilt switchyard-benchcp; built when empty")
	fs.StringVar(&o.logLevel, "log-level", "info", "debug, info, warn or error")
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	if fs.NArg() > 0 {
		return o, fmt.Errorf("unexpected arguments: %v", fs.Args())
	}
	return o, nil
}

func run(args []string, stderr io.Writer) error {
	o, err := parseFlags(args, stderr)
	if err != nil {
		return cmdshell.Usage(err)
	}
	lvl, err := cmdshell.ParseLevel(o.logLevel)
	if err != nil {
		return cmdshell.Usage(err)
	}
	log := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: lvl}))
	klog.SetSlogLogger(log)
	if o.inJSON != "" {
		return render(strings.Split(o.inJSON, ","), o.outMD)
	}
	ctx, stop := cmdshell.SignalContext()
	defer stop()
	if o.workDir == "" {
		if o.workDir, err = os.MkdirTemp("", "switchyard-bench-"); err != nil {
			return err
		}
		defer os.RemoveAll(o.workDir)
	}
	if o.bins, err = bench.Build(ctx, o.workDir, o.bins); err != nil {
		return err
	}
	h := &harness{o: o, log: log, env: &bench.Env{Bins: o.bins, WorkDir: o.workDir, Log: log}}
	for _, s := range split(o.suites) {
		switch s {
		case "fanout":
			err = h.fanout(ctx)
		case "apiload":
			err = h.apiload(ctx)
		default:
			err = fmt.Errorf("unknown suite %q", s)
		}
		if err != nil {
			return err
		}
	}
	return render([]string{o.outJSON}, o.outMD)
}

// render writes the markdown table of every record in files.
func render(files []string, outMD string) error {
	var recs []bench.Record
	for _, f := range files {
		fh, err := os.Open(f)
		if err != nil {
			return err
		}
		rs, err := bench.ReadJSON(fh)
		_ = fh.Close()
		if err != nil {
			return fmt.Errorf("%s: %w", f, err)
		}
		recs = append(recs, rs...)
	}
	f, err := os.Create(outMD)
	if err != nil {
		return err
	}
	if err := bench.Markdown(f, recs); err != nil {
		_ = f.Close()
		return err
	}
	return f.Close()
}

type harness struct {
	o   options
	log *slog.Logger
	env *bench.Env
}

// save appends one record to the JSON file at once, so a long suite that
// fails late keeps what it measured.
func (h *harness) save(r bench.Record) error {
	f, err := os.OpenFile(h.o.outJSON, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		return err
	}
	if err := bench.WriteJSON(f, []bench.Record{r}); err != nil {
		_ = f.Close()
		return err
	}
	return f.Close()
}

func split(s string) []string {
	var out []string
	for f := range strings.SplitSeq(s, ",") {
		if f = strings.TrimSpace(f); f != "" {
			out = append(out, f)
		}
	}
	return out
}

func ints(s string) ([]int, error) {
	var out []int
	for _, f := range split(s) {
		n, err := strconv.Atoi(f)
		if err != nil {
			return nil, fmt.Errorf("%q: %w", s, err)
		}
		out = append(out, n)
	}
	return out, nil
}

// sizes parses "1000x10,10000x10".
func sizes(s string) ([][2]int, error) {
	var out [][2]int
	for _, f := range split(s) {
		a, b, ok := strings.Cut(f, "x")
		m, err1 := strconv.Atoi(a)
		k, err2 := strconv.Atoi(b)
		if !ok || err1 != nil || err2 != nil || m <= 0 || k <= 0 {
			return nil, fmt.Errorf("size %q: want SERVICESxENDPOINTS", f)
		}
		out = append(out, [2]int{m, k})
	}
	return out, nil
}

// profileFile inserts tag before path's extension.
func profileFile(path, tag string) string {
	if path == "" {
		return ""
	}
	ext := filepath.Ext(path)
	return strings.TrimSuffix(path, ext) + "-" + tag + ext
}
