package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/switchyard-proxy/switchyard/e2e/cluster"
	"github.com/switchyard-proxy/switchyard/e2e/conformance"
	"github.com/switchyard-proxy/switchyard/e2e/testbed/apiserver"
)

// harness runs the proxies one bed at a time.
type harness struct {
	log      *slog.Logger
	out      io.Writer
	cfg      config
	versions map[string]string
	base     cluster.Config // with the default images
	kpImage  string         // kube-proxy archive, when a kube-proxy run is asked for
}

// buildImages builds (or takes from the cache) the bed's images once, and
// kube-proxy's only when a kube-proxy run is asked for.
func (h *harness) buildImages(ctx context.Context) error {
	bin, err := apiserver.BinDir()
	if err != nil {
		return err
	}
	if _, err := os.Stat(filepath.Join(bin, "e2e.test")); err != nil {
		return fmt.Errorf("e2e.test not built (make testbed, or BUILD_E2E=1 hack/testbed-build.sh): %w", err)
	}
	h.base = cluster.Config{Nodes: h.cfg.nodes, BinDir: bin, KeepDir: h.cfg.keepDir, Logger: h.log, DualStack: h.cfg.dualStack}
	archives, err := cluster.BuildImages(ctx, h.base)
	if err != nil {
		return err
	}
	suite, err := cluster.BuildSuiteImages(ctx, h.base)
	if err != nil {
		return fmt.Errorf("the suite's images (make testbed builds regression-issue-74839): %w", err)
	}
	h.base = cluster.WithImages(h.base, append(archives, suite...))
	for _, p := range h.cfg.proxies {
		if strings.HasPrefix(p, "kube-proxy-") {
			a, err := cluster.BuildKubeProxyImage(ctx, h.base)
			if err != nil {
				return fmt.Errorf("kube-proxy image (make testbed builds kube-proxy): %w", err)
			}
			h.kpImage = a.Path
			break
		}
	}
	return nil
}

// runProxy brings up a bed for one proxy, runs the suite, writes the
// results and tears the bed down.
func (h *harness) runProxy(ctx context.Context, name string) (err error) {
	p, err := cluster.ParseProxy(name)
	if err != nil {
		return err
	}
	log := h.log.With("proxy", p.Name)
	begin := time.Now()
	c, err := cluster.UpWithProxy(ctx, h.base, p, h.cfg.overlay, h.kpImage)
	if err != nil {
		return err
	}
	defer func() {
		dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Minute)
		defer cancel()
		err = errors.Join(err, c.Down(dctx))
	}()
	ready := time.Since(begin)
	log.Info("bed ready", "nodes", c.Nodes(), "after", ready.Round(time.Millisecond))
	res, err := conformance.Run(ctx, c, conformance.Options{Proxy: p.Name, Focus: h.cfg.focus, Skip: h.cfg.skip,
		Dir: filepath.Join(h.cfg.logDir, p.Name), Timeout: h.cfg.timeout, Logger: h.log, Parallel: h.cfg.parallel})
	if err != nil {
		return err
	}
	if _, err := conformance.RecordSkips(&res, h.cfg.skipRules()); err != nil {
		return err
	}
	res.Versions = map[string]string{"nodes": strconv.Itoa(c.Nodes()), "parallel": strconv.Itoa(max(h.cfg.parallel, 1))}
	if h.cfg.dualStack {
		res.Versions["dualStack"] = "true"
	}
	if p.Kind == cluster.KindSwitchyard {
		res.Versions["overlay"] = h.cfg.overlay
	}
	for k, v := range h.versions {
		res.Versions[k] = v
	}
	if p.Kind == cluster.KindKubeProxy {
		res.Versions["kube-proxy"] = res.Versions["kubernetes"]
	}
	return h.report(res, ready)
}

// report writes the results file, printing the summary, the failures and
// what changed from the previous file.
func (h *harness) report(res conformance.Results, ready time.Duration) error {
	path := filepath.Join(h.cfg.out, res.Proxy+".json")
	old, oldErr := conformance.ReadResults(path)
	if err := res.Write(path); err != nil {
		return err
	}
	fmt.Fprintf(h.out, "%s (bed ready in %v) -> %s\n", res.Summary(), ready.Round(time.Second), path)
	for _, name := range res.Names() {
		if s := res.Specs[name]; s.Outcome == conformance.Failed {
			fmt.Fprintf(h.out, "  FAILED %s: %s\n", name, s.Reason)
		}
	}
	if oldErr == nil {
		diff := conformance.Diff(old, res)
		fmt.Fprintf(h.out, "  changes since %s (%d):\n", old.Date, len(diff))
		for _, line := range diff {
			fmt.Fprintln(h.out, "    "+line)
		}
	}
	return nil
}
