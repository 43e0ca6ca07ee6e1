package conformance

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/switchyard-proxy/switchyard/e2e/cluster"
	"github.com/switchyard-proxy/switchyard/e2e/testbed/launch"
)

// FastFocus selects the fast subset make test runs: the 15 Services
// [Conformance] specs and the ones a proxy gets wrong most easily (REJECT
// without endpoints, service-proxy-name, affinity timeouts, hairpin, UDP
// conntrack when the server pod cycles, kube-proxy's /healthz and
// /proxyMode on the agent).
const FastFocus = `\[sig-network\] (Services (.*\[Conformance\]|should be rejected when no endpoints exist|` +
	`should implement service\.kubernetes\.io/service-proxy-name|should have session affinity timeout work|` +
	`should allow pods to hairpin back to themselves)|Conntrack should be able to preserve UDP traffic when server pod cycles|` +
	`Networking should check kube-proxy urls)`

// FastCount is how many specs FastFocus selects in e2e.test v1.37.2: 15
// Conformance, 5 more Services specs, 4 Conntrack UDP specs and the
// kube-proxy URLs spec.
const FastCount = 25

// Options select what Run runs.
type Options struct {
	Proxy   string // the proxy under test, recorded in the results
	Focus   string // ginkgo focus regexp
	Skip    string // ginkgo skip regexp, optional
	Dir     string // report and log directory (created)
	Timeout time.Duration
	Logger  *slog.Logger
	// Parallel > 1 runs the specs in that many ginkgo processes through
	// the ginkgo CLI (built beside e2e.test), as upstream's
	// hack/ginkgo-e2e.sh does; [Serial] specs still run alone, after the
	// others. Most of a spec's time is waiting for pods and polling, so a
	// 2-core bed runs three at once without starving any.
	Parallel int
}

// Run runs e2e.test with o's selection inside c's client namespace and
// returns the outcome of every selected spec.
func Run(ctx context.Context, c *cluster.Cluster, o Options) (Results, error) {
	if o.Timeout == 0 {
		o.Timeout = 2 * time.Hour
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	bin := filepath.Join(c.BinDir(), "e2e.test")
	if _, err := os.Stat(bin); err != nil {
		return Results{}, fmt.Errorf("e2e.test not built (BUILD_E2E=1 hack/testbed-build.sh, or make deps): %w", err)
	}
	focus, err := regexp.Compile(o.Focus)
	if err != nil {
		return Results{}, fmt.Errorf("focus: %w", err)
	}
	if err := os.MkdirAll(o.Dir, 0o755); err != nil {
		return Results{}, err
	}
	report := filepath.Join(o.Dir, "report.json")
	_ = os.Remove(report)
	argv := e2eArgv(bin, c, o, report)
	if o.Parallel > 1 {
		ginkgo := filepath.Join(c.BinDir(), "ginkgo")
		if _, err := os.Stat(ginkgo); err != nil {
			return Results{}, fmt.Errorf("ginkgo CLI not built (BUILD_E2E=1 hack/testbed-build.sh, or make deps) for -parallel: %w", err)
		}
		argv = ginkgoArgv(ginkgo, bin, o, report, argv[1:])
	}
	begin := time.Now()
	p, err := launch.Start(c.Topology().Guard(), launch.Spec{Name: "e2e.test " + o.Proxy, Argv: argv,
		NetNS: "/run/netns/" + c.ClientNS(), Dir: o.Dir, LogPath: filepath.Join(o.Dir, "e2e.log")})
	if err != nil {
		return Results{}, err
	}
	o.Logger.Info("e2e.test running", "proxy", o.Proxy, "focus", o.Focus, "log", p.LogPath)
	tick := time.NewTicker(time.Minute)
	defer tick.Stop()
wait:
	for {
		select {
		case <-p.Done():
			break wait
		case <-ctx.Done():
			_ = p.Stop(5 * time.Second)
			return Results{}, ctx.Err()
		case <-tick.C:
			o.Logger.Info("e2e.test still running", "proxy", o.Proxy, "elapsed", time.Since(begin).Round(time.Second))
		}
	}
	// e2e.test exits non-zero when a spec fails; the report says which.
	specs, err := parseReport(report, focus.MatchString)
	if err != nil {
		return Results{}, fmt.Errorf("%w\n--- %s ---\n%s", err, p.LogPath, p.Tail(40))
	}
	if len(specs) == 0 {
		return Results{}, fmt.Errorf("e2e.test selected no spec with focus %q\n%s", o.Focus, p.Tail(40))
	}
	return Results{Proxy: o.Proxy, Focus: o.Focus, Skip: o.Skip, Specs: specs, Elapsed: time.Since(begin),
		Date: time.Now().UTC().Format(time.DateOnly)}, nil
}

// e2eArgv runs e2e.test alone, one spec at a time.
func e2eArgv(bin string, c *cluster.Cluster, o Options, report string) []string {
	argv := []string{bin,
		"--kubeconfig=" + c.AdminKubeconfig(),
		"--kubectl-path=" + filepath.Join(c.BinDir(), "kubectl"),
		"--provider=local",
		// Without it only ginkgo process 1 counts the nodes (in its
		// SynchronizedBeforeSuite) and every spec needing two nodes skips
		// itself on the others ("Requires at least 2 nodes (not -1)"), as
		// upstream's hack/ginkgo-e2e.sh knows.
		"--num-nodes=" + strconv.Itoa(c.Nodes()),
		"--dump-logs-on-failure=false",
		"--e2e-output-dir=" + o.Dir,
		"--ginkgo.focus=" + o.Focus,
		"--ginkgo.json-report=" + report,
		"--ginkgo.no-color",
		"--ginkgo.timeout=" + o.Timeout.String(),
	}
	if o.Skip != "" {
		argv = append(argv, "--ginkgo.skip="+o.Skip)
	}
	return argv
}

// ginkgoArgv runs e2e.test under the ginkgo CLI with o.Parallel processes:
// the selection and the report belong to the CLI (which merges every
// process's report into one), the framework's flags to e2e.test after "--".
func ginkgoArgv(ginkgo, bin string, o Options, report string, e2eArgs []string) []string {
	argv := []string{ginkgo, "--procs=" + strconv.Itoa(o.Parallel), "--focus=" + o.Focus,
		"--json-report=" + report, "--no-color", "--timeout=" + o.Timeout.String()}
	if o.Skip != "" {
		argv = append(argv, "--skip="+o.Skip)
	}
	argv = append(argv, bin, "--")
	for _, a := range e2eArgs {
		if !strings.HasPrefix(a, "--ginkgo.") {
			argv = append(argv, a)
		}
	}
	return argv
}
