package bench

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/switchyard-proxy/switchyard/e2e/testbed/apiserver"
)

// Packages of the two control-plane commands.
const (
	controlPlanePkg = "github.com/switchyard-proxy/switchyard/controlplane/cmd/switchyard-controlplane"
	benchCPPkg      = "github.com/switchyard-proxy/switchyard/controlplane/internal/bench/cmd/switchyard-benchcp"
)

// Binaries are the control-plane commands a benchmark runs.
type Binaries struct {
	ControlPlane string // switchyard-controlplane (path a)
	BenchCP      string // switchyard-benchcp (path b)
}

// Build compiles the commands that are not given into dir, the way the
// Makefile builds binaries (CGO_ENABLED=0 -trimpath, shared build cache).
func Build(ctx context.Context, dir string, have Binaries) (Binaries, error) {
	if have.ControlPlane != "" && have.BenchCP != "" {
		return have, nil
	}
	root, err := apiserver.RepoRoot()
	if err != nil {
		return have, err
	}
	for _, b := range []struct {
		dst *string
		pkg string
	}{{&have.ControlPlane, controlPlanePkg}, {&have.BenchCP, benchCPPkg}} {
		if *b.dst != "" {
			continue
		}
		out := filepath.Join(dir, filepath.Base(b.pkg))
		cmd := exec.CommandContext(ctx, "go", "build", "-trimpath", "-o", out, b.pkg)
		cmd.Dir = root
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
		if msg, err := cmd.CombinedOutput(); err != nil {
			return have, fmt.Errorf("go build %s: %w\n%s", b.pkg, err, msg)
		}
		*b.dst = out
	}
	return have, nil
}

// process is a control plane running as its own process, so its CPU time
// and memory are its own.
type process struct {
	cmd     *exec.Cmd
	done    chan struct{}
	logPath string
	grpc    string // gRPC address
	metrics string // /metrics address
	control string // benchcp control API; empty for the real binary
}

// startProcess runs bin with args plus the listen flags, and waits until
// /readyz answers (informers synced, first views published).
func startProcess(ctx context.Context, bin string, args []string, logPath string, control bool, timeout time.Duration) (*process, error) {
	addrs, err := freeAddrs(4)
	if err != nil {
		return nil, err
	}
	p := &process{done: make(chan struct{}), logPath: logPath, grpc: addrs[0], metrics: addrs[1]}
	args = append(args, "--listen", p.grpc, "--metrics-bind-address", p.metrics, "--healthz-bind-address", addrs[2])
	if control {
		p.control = addrs[3]
		args = append(args, "--control-address", p.control)
	}
	logf, err := os.Create(logPath)
	if err != nil {
		return nil, fmt.Errorf("control-plane log: %w", err)
	}
	p.cmd = exec.Command(bin, args...)
	p.cmd.Stdout, p.cmd.Stderr = logf, logf
	p.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := p.cmd.Start(); err != nil {
		_ = logf.Close()
		return nil, fmt.Errorf("start %s: %w", bin, err)
	}
	go func() { _ = p.cmd.Wait(); _ = logf.Close(); close(p.done) }()
	if err := p.waitReady(ctx, "http://"+addrs[2]+"/readyz", timeout); err != nil {
		_ = p.stop()
		return nil, err
	}
	return p, nil
}

func (p *process) pid() int { return p.cmd.Process.Pid }

func (p *process) waitReady(ctx context.Context, url string, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if resp, err := http.DefaultClient.Do(req); err == nil {
			_ = resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		select {
		case <-p.done:
			return fmt.Errorf("control plane exited before ready: %s", tail(p.logPath))
		case <-ctx.Done():
			return fmt.Errorf("control plane not ready: %w: %s", ctx.Err(), tail(p.logPath))
		case <-tick.C:
		}
	}
}

// stop sends SIGTERM, and SIGKILL after a grace period.
func (p *process) stop() error {
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	t := time.NewTimer(20 * time.Second)
	defer t.Stop()
	select {
	case <-p.done:
		return nil
	case <-t.C:
		_ = syscall.Kill(-p.pid(), syscall.SIGKILL)
		<-p.done
		return errors.New("control plane ignored SIGTERM; killed")
	}
}

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
	v, err := scrape(ctx, "http://"+p.metrics+"/metrics", "go_memstats_heap_inuse_bytes", nil)
	return uint64(v), err
}

// scrape sums the samples of one metric in a Prometheus text exposition
// whose label block contains every string in match.
func scrape(ctx context.Context, url, metric string, match []string) (float64, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return 0, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, fmt.Errorf("scrape %s: %w", url, err)
	}
	defer resp.Body.Close()
	return sumMetric(resp.Body, metric, match)
}

func sumMetric(r io.Reader, metric string, match []string) (float64, error) {
	var sum float64
	found := false
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
lines:
	for sc.Scan() {
		line := sc.Text()
		rest, ok := strings.CutPrefix(line, metric)
		if !ok || (rest != "" && rest[0] != ' ' && rest[0] != '{') {
			continue
		}
		for _, m := range match {
			if !strings.Contains(rest, m) {
				continue lines
			}
		}
		f := strings.Fields(rest[strings.LastIndexByte(rest, '}')+1:])
		if len(f) == 0 {
			continue
		}
		v, err := strconv.ParseFloat(f[0], 64)
		if err != nil {
			return 0, fmt.Errorf("metric %s: %w", metric, err)
		}
		sum += v
		found = true
	}
	if err := sc.Err(); err != nil {
		return 0, err
	}
	if !found {
		return 0, fmt.Errorf("metric %s not exposed", metric)
	}
	return sum, nil
}

func freeAddrs(n int) ([]string, error) {
	var out []string
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, err
		}
		out = append(out, l.Addr().String())
		defer l.Close()
	}
	return out, nil
}

// tail returns the last lines of a log file.
func tail(path string) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return err.Error()
	}
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	return strings.Join(lines[max(0, len(lines)-20):], "\n")
}
