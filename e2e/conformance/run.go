package conformance

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"regexp"
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
	argv := []string{bin,
		"--kubeconfig=" + c.AdminKubeconfig(),
		"--kubectl-path=" + filepath.Join(c.BinDir(), "kubectl"),
		"--provider=local",
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
