package netns

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os/exec"
	"strings"
	"time"
)

// ExecError is returned by Exec and ExecInput when the command fails.
type ExecError struct {
	NS     string
	Argv   []string
	Stderr string
	Err    error // typically *exec.ExitError
}

func (e *ExecError) Error() string {
	msg := fmt.Sprintf("in %s: %s: %v", e.NS, strings.Join(e.Argv, " "), e.Err)
	if e.Stderr != "" {
		msg += ": " + e.Stderr
	}
	return msg
}

func (e *ExecError) Unwrap() error { return e.Err }

// ExitCode returns the exit code of a failed Exec, or -1 when err is not an
// exit of the command.
func ExitCode(err error) int {
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return ee.ExitCode()
	}
	return -1
}

// Exec runs argv inside the namespace ns with `ip netns exec` (so it sees the
// same environment a human debugging with `ip netns exec` would) and returns
// its standard output.
func (t *Topology) Exec(ctx context.Context, ns string, argv ...string) ([]byte, error) {
	return t.ExecInput(ctx, ns, nil, argv...)
}

// ExecInput is Exec with stdin connected to the command (for iptables-restore,
// nft -f -, …). Shell redirections must be wrapped in `sh -c`: a redirection
// written by the caller would run in the host namespace.
func (t *Topology) ExecInput(ctx context.Context, ns string, stdin io.Reader, argv ...string) ([]byte, error) {
	if len(argv) == 0 {
		return nil, errors.New("exec: empty argv")
	}
	if _, err := t.checkMember(ns); err != nil {
		return nil, err
	}
	cmd := exec.CommandContext(ctx, "ip", netnsExecArgs(ns, argv)...)
	cmd.Stdin = stdin
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	cmd.WaitDelay = 2 * time.Second
	if err := cmd.Run(); err != nil {
		return stdout.Bytes(), &ExecError{NS: ns, Argv: argv, Stderr: strings.TrimSpace(stderr.String()), Err: err}
	}
	return stdout.Bytes(), nil
}

func netnsExecArgs(ns string, argv []string) []string {
	return append([]string{"netns", "exec", ns}, argv...)
}
