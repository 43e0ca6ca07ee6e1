// Command switchyard-conformance runs upstream Kubernetes' e2e.test against
// each service proxy on a fresh real-cluster bed (e2e/cluster), one bed at
// a time, and keeps the outcome as data (make conformance):
//
//	switchyard-conformance [-proxies switchyard-iptables,…,kube-proxy-nftables] [-focus RE] [-skip RE] [-nodes 3] [-parallel 3] [-dual-stack]
//	switchyard-conformance -markdown-only
//
// For each proxy: bring up a bed (-nodes, zones zone-a/b/c), install CoreDNS
// and the proxy (Switchyard from deploy/ in the given dataplane mode, or
// upstream kube-proxy as a DaemonSet), wait until CoreDNS is Ready through
// it, run e2e.test with the focus and the skips of conformance.BedSkips,
// write conformance/results/<proxy>.json (printing what changed from the
// previous file), tear the bed down. Then CONFORMANCE.md is regenerated from
// every results file; -markdown-only does only that.
//
// Everything runs inside namespaces the bed creates (root needed, except
// for -markdown-only); nothing changes in this machine's network namespace
// or its sysctls.
package main

import (
	"cmp"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/switchyard-proxy/switchyard/e2e/cluster"
	"github.com/switchyard-proxy/switchyard/e2e/cmd/internal/cmdshell"
	"github.com/switchyard-proxy/switchyard/e2e/conformance"
	"github.com/switchyard-proxy/switchyard/e2e/testbed/apiserver"
)

// defaultProxies is every proxy the bed can run, in CONFORMANCE.md's order.
var defaultProxies = []string{"switchyard-iptables", "switchyard-nftables", "switchyard-userspace",
	"kube-proxy-iptables", "kube-proxy-nftables"}

const defaultNodes = 6

// defaultParallel keeps a full [sig-network] run near 20 minutes per proxy
// on 2 cores (one process: ~1 hour); specs mostly wait on pods.
const defaultParallel = 3

// config is the command line.
type config struct {
	proxies      []string
	nodes        int
	focus, skip  string
	out          string // results directory
	markdown     string // CONFORMANCE.md
	markdownOnly bool
	timeout      time.Duration
	logDir       string
	keepDir      bool
	overlay      string // Switchyard's install (e2e/cluster/overlays)
	parallel     int    // ginkgo processes
	// dualStack runs each proxy on an IPv4/IPv6 bed (cluster.Config
	// DualStack) with conformance.DualStackBedSkips. Its results go to
	// their own directory (default <out>/dualstack) and CONFORMANCE.md is
	// left alone: its table is the IPv4 bed's, one column per proxy.
	dualStack bool
}

// dualStackDir is where a dual-stack run's results go, under -out.
const dualStackDir = "dualstack"

// skipRules is the skip table of the bed the config asks for.
func (c config) skipRules() []conformance.SkipRule {
	if c.dualStack {
		return conformance.DualStackBedSkips()
	}
	return conformance.BedSkips()
}

func main() {
	const name = "switchyard-conformance"
	root, err := apiserver.RepoRoot()
	if err != nil {
		cmdshell.Exit(name, err)
	}
	c, err := parseFlags(root, os.Args[1:])
	if err != nil {
		cmdshell.Exit(name, cmdshell.Usage(err))
	}
	cmdshell.Run(name, func(ctx context.Context) error {
		return run(ctx, os.Stdout, cmdshell.Logger(slog.LevelInfo), c)
	})
}

// parseFlags reads the command line; root is the repository's root.
func parseFlags(root string, args []string) (config, error) {
	var c config
	var proxies string
	fs := flag.NewFlagSet("switchyard-conformance", flag.ContinueOnError)
	fs.StringVar(&proxies, "proxies", strings.Join(defaultProxies, ","), "comma-separated proxies to run, each switchyard-<iptables|nftables|userspace|ipvs> or kube-proxy-<iptables|nftables>")
	fs.IntVar(&c.nodes, "nodes", defaultNodes, "kubelet nodes per bed (1..6; zones zone-a, zone-b, zone-c round-robin: 6 gives the Traffic Distribution specs their 3 zones of 2 nodes)")
	fs.StringVar(&c.focus, "focus", `\[sig-network\]`, "ginkgo focus regexp")
	fs.StringVar(&c.skip, "skip", conformance.SkipRegexp(conformance.BedSkips()), "ginkgo skip regexp (default: every pattern of conformance.BedSkips, each recorded with its reason)")
	fs.StringVar(&c.out, "out", filepath.Join(root, "conformance", "results"), "directory of the <proxy>.json results files")
	fs.StringVar(&c.markdown, "markdown", filepath.Join(root, "CONFORMANCE.md"), "the table generated from every results file")
	fs.BoolVar(&c.markdownOnly, "markdown-only", false, "only regenerate -markdown from the results files in -out; run nothing")
	fs.DurationVar(&c.timeout, "timeout", 3*time.Hour, "e2e.test's timeout per proxy")
	fs.StringVar(&c.logDir, "logdir", filepath.Join(os.TempDir(), "switchyard-conformance"), "e2e.test's report and log per proxy (<logdir>/<proxy>/e2e.log), kept after teardown")
	fs.StringVar(&c.overlay, "switchyard-overlay", "kube-system", "Switchyard's install: kube-system (deploy/ in kube-system with the agents labelled k8s-app=kube-proxy, so the specs that restart kube-proxy by that label restart Switchyard's agents) or base (deploy/ as shipped, in switchyard-system); plaintext and mtls as e2e/cluster/overlays name them")
	fs.IntVar(&c.parallel, "parallel", defaultParallel, "ginkgo processes running specs at once (1: e2e.test alone; more: through the ginkgo CLI, [Serial] specs still alone at the end)")
	fs.BoolVar(&c.keepDir, "keep-dir", false, "keep each bed's state directory (every component's log) after teardown")
	fs.BoolVar(&c.dualStack, "dual-stack", false, "run on a dual-stack IPv4/IPv6 bed: the [Feature:IPv6DualStack] specs run too (default -skip: conformance.DualStackBedSkips); results in <out>/"+dualStackDir+" unless -out is given; CONFORMANCE.md is not regenerated")
	if err := fs.Parse(args); err != nil {
		return c, err
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	// A dual-stack run's defaults follow -dual-stack unless given.
	if c.dualStack && !set["skip"] {
		c.skip = conformance.SkipRegexp(c.skipRules())
	}
	if c.dualStack && !set["out"] {
		c.out = filepath.Join(c.out, dualStackDir)
	}
	if fs.NArg() > 0 {
		return c, fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	c.proxies = strings.Split(proxies, ",")
	return c, nil
}

func run(ctx context.Context, stdout io.Writer, log *slog.Logger, c config) error {
	if c.markdownOnly {
		if c.dualStack {
			return errors.New("-markdown-only regenerates CONFORMANCE.md, the IPv4 bed's table: drop -dual-stack")
		}
		return writeMarkdown(stdout, c)
	}
	for _, p := range c.proxies {
		if _, err := cluster.ParseProxy(p); err != nil {
			return err
		}
	}
	if os.Geteuid() != 0 {
		return errors.New("needs root: each bed creates network namespaces, mount namespaces and cgroups (never touching this machine's own network namespace or sysctls); -markdown-only does not")
	}
	if err := os.MkdirAll(c.out, 0o755); err != nil {
		return err
	}
	h := &harness{log: log, out: stdout, cfg: c, versions: cluster.Versions(ctx)}
	if err := h.buildImages(ctx); err != nil {
		return err
	}
	var errs []error
	for _, p := range c.proxies {
		if err := ctx.Err(); err != nil {
			errs = append(errs, err)
			break
		}
		if err := h.runProxy(ctx, p); err != nil {
			log.Error("proxy run failed; next proxy", "proxy", p, "err", err)
			errs = append(errs, fmt.Errorf("%s: %w", p, err))
		}
	}
	if c.dualStack {
		fmt.Fprintf(stdout, "dual-stack results in %s; %s not regenerated (its table is the IPv4 bed's)\n", c.out, c.markdown)
		return errors.Join(errs...)
	}
	errs = append(errs, writeMarkdown(stdout, c))
	return errors.Join(errs...)
}

// writeMarkdown regenerates CONFORMANCE.md from every results file.
func writeMarkdown(stdout io.Writer, c config) error {
	runs, err := conformance.ReadDir(c.out, defaultProxies)
	if err != nil {
		return err
	}
	md := conformance.Markdown(runs, conformance.MarkdownOptions{
		Command:    "make conformance CONFORMANCE_ARGS=-markdown-only",
		RunCommand: runCommand,
		Explain:    conformance.Explain(conformance.Explanations()),
		Notes: []string{
			"Upstream Kubernetes' own e2e suite (`e2e.test`, built from `k8s.io/kubernetes/test/e2e` at the " +
				"pinned version by `hack/testbed-build.sh`) against each service proxy, each on a fresh " +
				"real-cluster bed (`e2e/cluster`: kubelets, containerd and the control plane in network " +
				"namespaces on one machine, CoreDNS reached through the proxy under test). `switchyard-<mode>` " +
				"is `deploy/` with the agents in that dataplane mode; `kube-proxy-<mode>` is upstream kube-proxy " +
				"as a DaemonSet, the baseline.",
			"Skipped specs carry their reason: e2e.test's own message, or the bed's skip table " +
				"(`e2e/conformance/skips.go`: cloud providers, SSH, IPv6, SCTP, NetworkPolicy, the Internet, " +
				"opt-in features, conntrack sysctls the bed never lets a proxy write).",
		},
	})
	if err := os.WriteFile(c.markdown, []byte(md), 0o644); err != nil {
		return fmt.Errorf("markdown: %w", err)
	}
	fmt.Fprintf(stdout, "%s: %d results files\n", c.markdown, len(runs))
	return nil
}

// runCommand is the command that reproduces r.
func runCommand(r conformance.Results) string {
	cmd := "go run ./e2e/cmd/switchyard-conformance -proxies " + r.Proxy + " -focus " + shellQuote(r.Focus)
	if n := r.Versions["nodes"]; n != "" && n != fmt.Sprint(defaultNodes) {
		cmd += " -nodes " + n
	}
	// Results from before -parallel existed ran one process.
	if n := cmp.Or(r.Versions["parallel"], "1"); n != fmt.Sprint(defaultParallel) {
		cmd += " -parallel " + n
	}
	skips := conformance.BedSkips()
	if r.Versions["dualStack"] == "true" {
		cmd += " -dual-stack"
		skips = conformance.DualStackBedSkips()
	}
	if r.Skip != conformance.SkipRegexp(skips) {
		cmd += " -skip " + shellQuote(r.Skip)
	}
	return cmd
}

func shellQuote(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }
