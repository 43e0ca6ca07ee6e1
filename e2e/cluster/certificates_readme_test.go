package cluster_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/switchyard-proxy/switchyard/e2e/cluster"
	"github.com/switchyard-proxy/switchyard/e2e/testbed/readme"
)

// readmeShell is one sh that runs a README example's steps as an operator
// types them: its variables and files carry over from step to step, and
// the test does between two steps what the README says to ("Then wait").
// It runs in the bed's client network namespace, with the bed's kubectl
// first on PATH and the bed's admin kubeconfig, in its own directory.
type readmeShell struct {
	dir   string
	cmd   *exec.Cmd
	stdin io.WriteCloser
	out   *bufio.Scanner
	n     int
}

func startREADMEShell(t *testing.T, c *cluster.Cluster) *readmeShell {
	t.Helper()
	netnsPath := "/run/netns/" + c.ClientNS()
	if err := c.Topology().Guard().CheckPath(netnsPath); err != nil {
		t.Fatal(err)
	}
	s := &readmeShell{dir: t.TempDir()}
	s.cmd = exec.Command("nsenter", "--net="+netnsPath, "--", "sh", "-e")
	s.cmd.Dir = s.dir
	s.cmd.Env = append(os.Environ(), "KUBECONFIG="+c.AdminKubeconfig(), "PATH="+c.BinDir()+":"+os.Getenv("PATH"))
	s.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	var err error
	if s.stdin, err = s.cmd.StdinPipe(); err != nil {
		t.Fatal(err)
	}
	// A pipe of the kernel's: the shell and its commands write into it
	// directly, and its reader sees the end when they all exited.
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	s.cmd.Stdout, s.cmd.Stderr = w, w
	s.out = bufio.NewScanner(r)
	err = s.cmd.Start()
	w.Close()
	if err != nil {
		r.Close()
		t.Fatal(err)
	}
	t.Cleanup(func() {
		s.stdin.Close()
		_ = syscall.Kill(-s.cmd.Process.Pid, syscall.SIGKILL)
		_ = s.cmd.Wait()
		r.Close()
	})
	return s
}

// run runs one step's commands and returns their output once they are
// done. The step is a file sourced with stdin from /dev/null, so that no
// command reads the steps that follow; under sh -e, a failing command
// ends the shell and run returns its output with the error.
func (s *readmeShell) run(ctx context.Context, step readme.Step) (string, error) {
	s.n++
	marker := fmt.Sprintf("--- step %d done ---", s.n)
	file := filepath.Join(s.dir, fmt.Sprintf(".step-%d.sh", s.n))
	body := strings.Join(step.Commands, "\n") + "\necho '" + marker + "'\n"
	if err := os.WriteFile(file, []byte(body), 0o600); err != nil {
		return "", err
	}
	if _, err := fmt.Fprintf(s.stdin, ". '%s' </dev/null\n", file); err != nil {
		return "", err
	}
	// A step that hangs (rollout status without a timeout) ends the
	// shell: the scanner then stops.
	stop := context.AfterFunc(ctx, func() { _ = syscall.Kill(-s.cmd.Process.Pid, syscall.SIGKILL) })
	defer stop()
	var out strings.Builder
	for s.out.Scan() {
		if s.out.Text() == marker {
			return out.String(), nil
		}
		out.WriteString(s.out.Text() + "\n")
	}
	err := s.out.Err()
	if err == nil {
		err = errors.New("the shell exited")
	}
	if ctx.Err() != nil {
		err = fmt.Errorf("%w (%w)", ctx.Err(), err)
	}
	return out.String(), err
}

// runStep runs step with a deadline and fails t if it fails.
func (s *readmeShell) runStep(t *testing.T, step readme.Step, timeout time.Duration) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), timeout)
	defer cancel()
	began := time.Now()
	out, err := s.run(ctx, step)
	t.Logf("README step %q: %d commands, %v:\n%s", step.Comment, len(step.Commands), time.Since(began).Round(time.Millisecond), out)
	if err != nil {
		t.Fatalf("README step %q: %v", step.Comment, err)
	}
}
