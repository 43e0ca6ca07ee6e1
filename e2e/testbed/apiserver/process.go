package apiserver

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// process is one child (etcd or kube-apiserver) running in its own process
// group, with stdout and stderr going to a log file.
type process struct {
	name    string
	logPath string
	cmd     *exec.Cmd
	started time.Time
	done    chan struct{} // closed once the process has been reaped
	waitErr error         // valid after done is closed
}

// startProcess starts bin with args, logging to logPath.
func startProcess(name, bin string, args []string, logPath string) (*process, error) {
	logFile, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	// The child holds its own copy of the descriptor; ours is not needed.
	defer logFile.Close()

	cmd := exec.Command(bin, args...)
	cmd.Stdout = logFile
	cmd.Stderr = logFile
	cmd.SysProcAttr = sysProcAttr()
	p := &process{name: name, logPath: logPath, cmd: cmd, done: make(chan struct{})}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	p.started = time.Now()
	go func() {
		p.waitErr = cmd.Wait()
		close(p.done)
	}()
	return p, nil
}

// pid returns the process id, which is also its process group id.
func (p *process) pid() int { return p.cmd.Process.Pid }

// exited reports whether the process has ended, and how.
func (p *process) exited() (bool, error) {
	select {
	case <-p.done:
		return true, fmt.Errorf("%s (pid %d) exited: %v", p.name, p.pid(), p.waitErr)
	default:
		return false, nil
	}
}

// stop sends SIGTERM to the process group, SIGKILL after grace, and waits
// until the process has been reaped. It returns an error only when the
// process could not be stopped; a non-zero exit status after a signal is
// the expected outcome.
func (p *process) stop(grace time.Duration) error {
	// Signals go to the group only while its leader has not been reaped, so
	// a recycled pid is never signalled.
	if done, _ := p.exited(); done {
		return nil
	}
	if err := killGroup(p.pid(), syscall.SIGTERM); err != nil {
		return fmt.Errorf("stop %s: %w", p.name, err)
	}
	timer := time.NewTimer(grace)
	defer timer.Stop()
	select {
	case <-p.done:
		return nil
	case <-timer.C:
	}
	if err := killGroup(p.pid(), syscall.SIGKILL); err != nil {
		return fmt.Errorf("kill %s after %v grace: %w", p.name, grace, err)
	}
	// SIGKILL cannot be caught; a process that survives it for this long is
	// stuck in the kernel and there is nothing more to do.
	const reapTimeout = 30 * time.Second
	select {
	case <-p.done:
		return nil
	case <-time.After(reapTimeout):
		return fmt.Errorf("stop %s (pid %d): not reaped %v after SIGKILL", p.name, p.pid(), reapTimeout)
	}
}

// killGroup signals the process group pgid; a group that is already gone is
// not an error.
func killGroup(pgid int, sig syscall.Signal) error {
	err := syscall.Kill(-pgid, sig)
	if errors.Is(err, syscall.ESRCH) {
		return nil
	}
	return err
}

// rssBytes reads VmRSS from /proc/<pid>/status.
func rssBytes(pid int) (uint64, error) {
	data, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		return 0, fmt.Errorf("read RSS of pid %d: %w", pid, err)
	}
	return parseVMRSS(data)
}

// parseVMRSS extracts "VmRSS:   123456 kB" from a /proc/<pid>/status body.
func parseVMRSS(status []byte) (uint64, error) {
	for line := range bytes.Lines(status) {
		rest, ok := bytes.CutPrefix(line, []byte("VmRSS:"))
		if !ok {
			continue
		}
		fields := strings.Fields(string(rest))
		if len(fields) != 2 || fields[1] != "kB" {
			return 0, fmt.Errorf("parse VmRSS: unexpected %q", strings.TrimSpace(string(line)))
		}
		kb, err := strconv.ParseUint(fields[0], 10, 64)
		if err != nil {
			return 0, fmt.Errorf("parse VmRSS: %w", err)
		}
		return kb * 1024, nil
	}
	return 0, errors.New("parse VmRSS: no VmRSS line")
}

// tailFile returns the last n lines of the file at path.
func tailFile(path string, n int) (string, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return "", err
	}
	return tailLines(string(data), n), nil
}

func tailLines(s string, n int) string {
	s = strings.TrimRight(s, "\n")
	if s == "" || n <= 0 {
		return ""
	}
	lines := strings.Split(s, "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
