package netns

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"slices"
	"sync"
	"syscall"
	"time"
)

// stopGrace is how long Stop waits after SIGTERM before SIGKILL.
const stopGrace = 2 * time.Second

// Cmd is a process to start inside a namespace.
type Cmd struct {
	// Argv is the program and its arguments (looked up in PATH).
	Argv []string
	// Env is appended to this process's environment.
	Env []string
	// Stdout receives the standard output (default: discarded).
	Stdout io.Writer
	// Stderr receives the standard error (default: the topology's logger,
	// one record per line).
	Stderr io.Writer
}

// Process is a process started by Topology.Start. The topology stops it in
// Close; Stop stops it earlier.
type Process struct {
	NS   string
	Argv []string
	Pid  int

	cmd  *exec.Cmd
	done chan struct{}
	err  error // set before done is closed
}

// Done is closed when the process has exited and was reaped.
func (p *Process) Done() <-chan struct{} { return p.done }

// Err returns the result of waiting for the process; valid after Done.
func (p *Process) Err() error {
	<-p.done
	return p.err
}

// Signal sends sig to the process (through a pidfd, so never to a reused PID).
func (p *Process) Signal(sig os.Signal) error { return p.cmd.Process.Signal(sig) }

// Stop sends SIGTERM, waits up to two seconds (or until ctx is done), then
// sends SIGKILL and waits for the process to be reaped.
func (p *Process) Stop(ctx context.Context) error {
	select {
	case <-p.done:
		return nil
	default:
	}
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return fmt.Errorf("stop pid %d: %w", p.Pid, err)
	}
	grace := time.NewTimer(stopGrace)
	defer grace.Stop()
	select {
	case <-p.done:
		return nil
	case <-grace.C:
	case <-ctx.Done():
	}
	if err := p.cmd.Process.Kill(); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return fmt.Errorf("kill pid %d: %w", p.Pid, err)
	}
	reap := time.NewTimer(5 * time.Second)
	defer reap.Stop()
	select {
	case <-p.done:
		return nil
	case <-reap.C:
		return fmt.Errorf("pid %d (%s in %s) did not exit after SIGKILL", p.Pid, p.Argv[0], p.NS)
	}
}

// Start starts c inside namespace ns with `ip netns exec` (which execs, so the
// PID is the program's). The process is stopped when ctx is done, by Stop, or
// by Close.
func (t *Topology) Start(ctx context.Context, ns string, c Cmd) (*Process, error) {
	if len(c.Argv) == 0 {
		return nil, errors.New("start: empty argv")
	}
	if _, err := t.checkMember(ns); err != nil {
		return nil, err
	}
	cmd := exec.CommandContext(ctx, "ip", netnsExecArgs(ns, c.Argv)...)
	cmd.Cancel = func() error { return cmd.Process.Signal(syscall.SIGTERM) }
	cmd.WaitDelay = stopGrace
	cmd.Env = append(os.Environ(), c.Env...)
	cmd.Stdout = c.Stdout
	cmd.Stderr = c.Stderr
	if cmd.Stderr == nil {
		cmd.Stderr = LogWriter(t.log, "stderr", "ns", ns, "cmd", c.Argv[0])
	}
	// Hold the lock across Start so that Close cannot miss the process.
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closed {
		return nil, fmt.Errorf("start in %s: %w", ns, ErrClosed)
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %v in %s: %w", c.Argv, ns, err)
	}
	p := &Process{NS: ns, Argv: c.Argv, Pid: cmd.Process.Pid, cmd: cmd, done: make(chan struct{})}
	t.procs[p] = struct{}{}
	go func() {
		p.err = cmd.Wait()
		close(p.done)
	}()
	t.log.Debug("started", "ns", ns, "pid", p.Pid, "argv", c.Argv)
	return p, nil
}

// stopAll stops every process concurrently and waits for all of them.
func stopAll(ctx context.Context, procs []*Process) error {
	var wg sync.WaitGroup
	errs := make([]error, len(procs))
	for i, p := range procs {
		wg.Go(func() { errs[i] = p.Stop(ctx) })
	}
	wg.Wait()
	return errors.Join(errs...)
}

// LogWriter returns an io.Writer that logs each line written to it as one
// record with message msg, the given attributes and a "line" attribute. It
// is not safe for concurrent writers (os/exec copies with one goroutine).
func LogWriter(log *slog.Logger, msg string, attrs ...any) io.Writer {
	return &lineLogger{log: log, msg: msg, attrs: attrs}
}

type lineLogger struct {
	log   *slog.Logger
	msg   string
	attrs []any
	buf   []byte
}

func (l *lineLogger) Write(p []byte) (int, error) {
	l.buf = append(l.buf, p...)
	for {
		i := bytes.IndexByte(l.buf, '\n')
		if i < 0 {
			break
		}
		l.log.Info(l.msg, slices.Concat(l.attrs, []any{"line", string(l.buf[:i])})...)
		l.buf = l.buf[i+1:]
	}
	if len(l.buf) > 4096 {
		l.log.Info(l.msg, slices.Concat(l.attrs, []any{"line", string(l.buf)})...)
		l.buf = nil
	}
	return len(p), nil
}
