package launch

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/switchyard-proxy/switchyard/e2e/testbed/netns"
)

// DefaultGrace is how long Stop waits between SIGTERM and SIGKILL.
const DefaultGrace = 5 * time.Second

// Spec is one process to start.
type Spec struct {
	// Name labels logs and errors ("kube-apiserver", "kubelet node-0").
	Name string
	// Argv is the program and its arguments.
	Argv []string
	// Env is appended to this process's environment.
	Env []string
	// Dir is the working directory (default: inherited).
	Dir string
	// LogPath receives stdout and stderr (appended). Required.
	LogPath string
	// NetNS is the network-namespace file to enter.
	NetNS string
	// Target is a holder process whose network, mount and UTS namespaces
	// are entered (instead of NetNS).
	Target int
	// Loopback runs the process in this process's own namespaces, with no
	// guard (guard may be nil). Only for processes that listen and dial on
	// 127.0.0.1 or unix sockets and never touch the kernel's network
	// configuration (the API server's clients, the control plane). It
	// excludes NetNS and Target.
	Loopback bool
}

// Process is a started process.
type Process struct {
	Name    string
	LogPath string
	Started time.Time

	cmd     *exec.Cmd
	done    chan struct{}
	waitErr error
}

// Start checks the namespace against guard and starts the process.
func Start(guard *netns.HostGuard, s Spec) (*Process, error) {
	argv, err := enter(guard, s)
	if err != nil {
		return nil, fmt.Errorf("start %s: %w", s.Name, err)
	}
	log, err := os.OpenFile(s.LogPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return nil, fmt.Errorf("start %s: %w", s.Name, err)
	}
	// The child has its own copy of the descriptor.
	defer log.Close()
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Env = append(os.Environ(), s.Env...)
	cmd.Dir = s.Dir
	cmd.Stdout, cmd.Stderr = log, log
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %w", s.Name, err)
	}
	p := &Process{Name: s.Name, LogPath: s.LogPath, Started: time.Now(), cmd: cmd, done: make(chan struct{})}
	go func() {
		p.waitErr = cmd.Wait()
		close(p.done)
	}()
	return p, nil
}

// Run starts a short-lived command like Start and waits for it; its
// combined output is returned and also appended to LogPath when set.
func Run(ctx context.Context, guard *netns.HostGuard, s Spec) ([]byte, error) {
	argv, err := enter(guard, s)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", s.Name, err)
	}
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	cmd.Env = append(os.Environ(), s.Env...)
	cmd.Dir = s.Dir
	cmd.WaitDelay = 2 * time.Second
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err = cmd.Run()
	if s.LogPath != "" {
		if f, ferr := os.OpenFile(s.LogPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600); ferr == nil {
			fmt.Fprintf(f, "$ %s\n%s", strings.Join(s.Argv, " "), out.Bytes())
			f.Close()
		}
	}
	if err != nil {
		return out.Bytes(), fmt.Errorf("%s: %s: %w: %s", s.Name, strings.Join(s.Argv, " "), err, tail(out.String(), 20))
	}
	return out.Bytes(), nil
}

// enter returns argv wrapped in the nsenter call that enters s's
// namespaces, after the host guard accepted them; a Loopback spec's argv
// runs as it is.
func enter(guard *netns.HostGuard, s Spec) ([]string, error) {
	if len(s.Argv) == 0 {
		return nil, errors.New("empty argv")
	}
	switch {
	case s.Loopback:
		if s.Target > 0 || s.NetNS != "" {
			return nil, errors.New("Loopback excludes NetNS and Target")
		}
		return s.Argv, nil
	case guard == nil && (s.Target > 0 || s.NetNS != ""):
		return nil, errors.New("no host guard to check the namespace against")
	case s.Target > 0:
		if err := guard.CheckPath("/proc/" + strconv.Itoa(s.Target) + "/ns/net"); err != nil {
			return nil, err
		}
		return append([]string{"nsenter", "--target", strconv.Itoa(s.Target), "--net", "--mount", "--uts", "--"}, s.Argv...), nil
	case s.NetNS != "":
		if err := guard.CheckPath(s.NetNS); err != nil {
			return nil, err
		}
		return append([]string{"nsenter", "--net=" + s.NetNS, "--"}, s.Argv...), nil
	}
	return nil, fmt.Errorf("no namespace given: refusing to run %q in the machine's own: %w", s.Argv[0], netns.ErrHostNamespace)
}

// Pid is the process id (also its process group id).
func (p *Process) Pid() int { return p.cmd.Process.Pid }

// Done is closed once the process has been reaped.
func (p *Process) Done() <-chan struct{} { return p.done }

// Exited reports whether the process has ended, with its wait error.
func (p *Process) Exited() (bool, error) {
	select {
	case <-p.done:
		return true, fmt.Errorf("%s (pid %d) exited: %v", p.Name, p.Pid(), p.waitErr)
	default:
		return false, nil
	}
}

// Kill sends SIGKILL to the process group and waits for the leader.
func (p *Process) Kill() error { return p.Stop(0) }

// Stop sends SIGTERM to the group, SIGKILL after grace, and waits until the
// leader was reaped.
func (p *Process) Stop(grace time.Duration) error {
	if done, _ := p.Exited(); done {
		return nil
	}
	sig := syscall.SIGTERM
	if grace == 0 {
		sig = syscall.SIGKILL
	}
	if err := killGroup(p.Pid(), sig); err != nil {
		return fmt.Errorf("stop %s: %w", p.Name, err)
	}
	if grace > 0 {
		t := time.NewTimer(grace)
		defer t.Stop()
		select {
		case <-p.done:
			return nil
		case <-t.C:
		}
		if err := killGroup(p.Pid(), syscall.SIGKILL); err != nil {
			return fmt.Errorf("kill %s: %w", p.Name, err)
		}
	}
	select {
	case <-p.done:
		return nil
	case <-time.After(30 * time.Second):
		return fmt.Errorf("stop %s (pid %d): not reaped 30s after SIGKILL", p.Name, p.Pid())
	}
}

func killGroup(pgid int, sig syscall.Signal) error {
	if err := syscall.Kill(-pgid, sig); err != nil && !errors.Is(err, syscall.ESRCH) {
		return err
	}
	return nil
}

// Tail returns the last n lines of the process's log.
func (p *Process) Tail(n int) string {
	b, err := os.ReadFile(p.LogPath)
	if err != nil {
		return "(unreadable: " + err.Error() + ")"
	}
	return tail(string(b), n)
}

func tail(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
