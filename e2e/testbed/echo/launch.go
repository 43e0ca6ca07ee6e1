package echo

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"sync"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/switchyard-proxy/switchyard/e2e/testbed/netns"
)

// DefaultReadyTimeout bounds how long Start waits for a server to be ready.
const DefaultReadyTimeout = 10 * time.Second

// Launcher starts echo servers as processes inside topology namespaces.
type Launcher struct {
	Topo *netns.Topology
	// Binary is a built cmd/echo-server. Empty: re-exec the running binary,
	// whose TestMain or main must call RunChild first.
	Binary string
	// ReadyTimeout defaults to DefaultReadyTimeout.
	ReadyTimeout time.Duration
}

// Instance is a running echo server.
type Instance struct {
	Config  Config
	NS      string
	Process *netns.Process
}

// Stop stops the server (SIGTERM, then SIGKILL) and waits for it.
func (i *Instance) Stop(ctx context.Context) error { return i.Process.Stop(ctx) }

// Start runs an echo server in namespace ns and waits until it is ready. The
// server stops when ctx is done, on Stop, or when the topology closes.
func (l Launcher) Start(ctx context.Context, ns string, cfg Config) (*Instance, error) {
	cfg = cfg.withDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	argv, env, err := l.command(cfg)
	if err != nil {
		return nil, err
	}
	ready := &readyWatch{ch: make(chan struct{})}
	tail := &tailBuffer{max: 4 << 10}
	logw := netns.LogWriter(l.Topo.Logger(), "echo stderr", "ns", ns, "name", cfg.Name)
	p, err := l.Topo.Start(ctx, ns, netns.Cmd{
		Argv: argv, Env: env, Stdout: ready, Stderr: io.MultiWriter(tail, logw),
	})
	if err != nil {
		return nil, err
	}
	inst := &Instance{Config: cfg, NS: ns, Process: p}
	if err := l.waitReady(ctx, inst, ready); err != nil {
		stopErr := p.Stop(context.WithoutCancel(ctx))
		return nil, errors.Join(fmt.Errorf("echo %s in %s: %w (stderr: %q)", cfg.Name, ns, err, tail.String()), stopErr)
	}
	return inst, nil
}

func (l Launcher) command(cfg Config) (argv, env []string, err error) {
	if l.Binary != "" {
		return append([]string{l.Binary}, cfg.Args()...), nil, nil
	}
	exe, err := os.Executable()
	if err != nil {
		return nil, nil, fmt.Errorf("echo: locate own binary: %w", err)
	}
	js, err := json.Marshal(cfg)
	if err != nil {
		return nil, nil, fmt.Errorf("echo: encode config: %w", err)
	}
	// -test.run=^$ makes a test binary without the RunChild hook exit at
	// once instead of running its tests inside the pod.
	return []string{exe, "-test.run=^$"}, []string{ChildEnv + "=" + string(js)}, nil
}

// waitReady waits for the ready line, then until a TCP connection made from
// inside the namespace is accepted.
func (l Launcher) waitReady(ctx context.Context, inst *Instance, ready *readyWatch) error {
	timeout := l.ReadyTimeout
	if timeout == 0 {
		timeout = DefaultReadyTimeout
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	select {
	case <-ready.ch:
	case <-inst.Process.Done():
		return fmt.Errorf("exited before ready (%v); if it is this binary, does TestMain call echo.RunChild?", inst.Process.Err())
	case <-ctx.Done():
		return fmt.Errorf("no ready line: %w", ctx.Err())
	}
	if inst.Config.TCP == "" {
		return nil
	}
	addr, err := localDialAddr(inst.Config.TCP)
	if err != nil {
		return err
	}
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		err := l.Topo.Do(inst.NS, func() error {
			var d net.Dialer
			conn, err := d.DialContext(ctx, "tcp", addr)
			if err == nil {
				conn.Close()
			}
			return err
		})
		if err == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("tcp %s never accepted: %w", addr, err)
		case <-tick.C:
		}
	}
}

// localDialAddr turns a listen address into one to dial from the same
// namespace (":8080" → "127.0.0.1:8080").
func localDialAddr(listen string) (string, error) {
	host, port, err := net.SplitHostPort(listen)
	if err != nil {
		return "", fmt.Errorf("echo: listen address %q: %w", listen, err)
	}
	if ip := net.ParseIP(host); host == "" || (ip != nil && ip.IsUnspecified()) {
		host = "127.0.0.1"
	}
	return net.JoinHostPort(host, port), nil
}

// StartPods starts one server per pod, named after the pod, concurrently.
// cfg.Name is ignored. Instances are returned in the order of pods.
func StartPods(ctx context.Context, l Launcher, pods []netns.Pod, cfg Config) ([]*Instance, error) {
	out := make([]*Instance, len(pods))
	var g errgroup.Group
	for i, pod := range pods {
		c := cfg
		c.Name = pod.Name
		g.Go(func() error {
			inst, err := l.Start(ctx, pod.NS, c)
			out[i] = inst
			return err
		})
	}
	if err := g.Wait(); err != nil {
		var stopErrs []error
		for _, inst := range out {
			if inst != nil {
				stopErrs = append(stopErrs, inst.Stop(context.WithoutCancel(ctx)))
			}
		}
		return nil, errors.Join(append([]error{err}, stopErrs...)...)
	}
	return out, nil
}

// readyWatch closes ch when the ready line appears on the child's stdout.
type readyWatch struct {
	mu   sync.Mutex
	buf  []byte
	seen bool
	ch   chan struct{}
}

func (r *readyWatch) Write(p []byte) (int, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.seen {
		return len(p), nil
	}
	r.buf = append(r.buf, p...)
	for {
		line, rest, ok := bytes.Cut(r.buf, []byte("\n"))
		if !ok {
			break
		}
		r.buf = rest
		if string(bytes.TrimSpace(line)) == readyLine {
			r.seen = true
			r.buf = nil
			close(r.ch)
			break
		}
	}
	return len(p), nil
}

// tailBuffer keeps the last max bytes written to it.
type tailBuffer struct {
	mu  sync.Mutex
	max int
	buf []byte
}

func (t *tailBuffer) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.buf = append(t.buf, p...)
	if over := len(t.buf) - t.max; over > 0 {
		t.buf = t.buf[over:]
	}
	return len(p), nil
}

func (t *tailBuffer) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return string(t.buf)
}
