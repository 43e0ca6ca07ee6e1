package bench

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"time"

	"github.com/switchyard-proxy/switchyard/e2e/testbed/launch"
)

// benchCPPkg is the package of switchyard-benchcp (path b).
const benchCPPkg = "github.com/switchyard-proxy/switchyard/controlplane/internal/bench/cmd/switchyard-benchcp"

// stopGrace is how long a control plane may take to shut down before
// SIGKILL.
const stopGrace = 20 * time.Second

// Binaries are the control-plane commands a benchmark runs.
type Binaries struct {
	ControlPlane string // switchyard-controlplane (path a)
	BenchCP      string // switchyard-benchcp (path b)
}

// Build compiles the commands that are not given into dir with one
// launch.Build (CGO_ENABLED=0 -trimpath, the build cache every caller
// shares).
func Build(ctx context.Context, dir string, have Binaries) (Binaries, error) {
	var pkgs []string
	var dsts []*string
	for _, b := range []struct {
		dst *string
		pkg string
	}{{&have.ControlPlane, launch.ControlPlanePkg}, {&have.BenchCP, benchCPPkg}} {
		if *b.dst == "" {
			pkgs, dsts = append(pkgs, b.pkg), append(dsts, b.dst)
		}
	}
	out, err := launch.Build(ctx, dir, nil, pkgs...)
	if err != nil {
		return have, err
	}
	for i, dst := range dsts {
		*dst = out[i]
	}
	return have, nil
}

// process is a control plane running as its own process, so its CPU time
// and memory are its own.
type process struct {
	*launch.Process
	grpc    string // gRPC address
	metrics string // /metrics address
	control string // benchcp control API; empty for the real binary
}

// startProcess runs bin with args plus the listen flags on loopback, and
// waits until /readyz answers (informers synced, first views published).
// logPath is truncated first.
func startProcess(ctx context.Context, bin string, args []string, logPath string, control bool, timeout time.Duration) (*process, error) {
	addrs, err := launch.LoopbackAddrs(4)
	if err != nil {
		return nil, err
	}
	p := &process{grpc: addrs[0], metrics: addrs[1]}
	args = append(args, "--listen", p.grpc, "--metrics-bind-address", p.metrics, "--healthz-bind-address", addrs[2])
	if control {
		p.control = addrs[3]
		args = append(args, "--control-address", p.control)
	}
	if err := os.Remove(logPath); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("control-plane log: %w", err)
	}
	if p.Process, err = launch.Start(nil, launch.Spec{Name: filepath.Base(bin), Loopback: true,
		Argv: append([]string{bin}, args...), LogPath: logPath}); err != nil {
		return nil, err
	}
	rctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	if err := launch.WaitReady(rctx, launch.HTTPReady(nil, "http://"+addrs[2]+"/readyz"), p.Process); err != nil {
		_ = p.stop()
		return nil, err
	}
	return p, nil
}

// stop sends SIGTERM, and SIGKILL after a grace period.
func (p *process) stop() error { return p.Stop(stopGrace) }

// post calls the benchcp control API.
func (p *process) post(ctx context.Context, path string, body []byte) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://"+p.control+path, bytes.NewReader(body))
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return fmt.Errorf("control API %s: %w", path, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		msg, _ := io.ReadAll(resp.Body)
		return fmt.Errorf("control API %s: %s: %s", path, resp.Status, msg)
	}
	return nil
}

// heapInuse scrapes go_memstats_heap_inuse_bytes from /metrics.
func (p *process) heapInuse(ctx context.Context) (uint64, error) {
	m, err := launch.ScrapeMetrics(ctx, nil, "http://"+p.metrics+"/metrics")
	if err != nil {
		return 0, err
	}
	v, err := m.Sum("go_memstats_heap_inuse_bytes")
	return uint64(v), err
}

// sumMetric sums the samples of one metric in a Prometheus text exposition
// whose label block contains every string in match.
func sumMetric(r io.Reader, metric string, match []string) (float64, error) {
	m, err := launch.ParseMetrics(r)
	if err != nil {
		return 0, err
	}
	return m.Sum(metric, match...)
}
