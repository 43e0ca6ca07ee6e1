// Package command runs the binaries dataplane modes program the kernel
// with (iptables-restore, nft, ipset, ipvsadm) behind one seam, so each
// mode tests against a fake and runs in a chosen network namespace.
package command

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os/exec"
	"strings"
)

// Runner runs one command with stdin and returns its stdout. It is the
// seam between a dataplane mode and the kernel: the real one execs binaries,
// the modes' fakes (iptablestest, ipvstest) keep state in memory. A Runner is bound to one
// network namespace; everything it runs must run there.
type Runner interface {
	Run(ctx context.Context, argv []string, stdin []byte) ([]byte, error)
}

// ExecRunner runs commands with os/exec, each prefixed with Prefix (for
// example "ip", "netns", "exec", "NS"; empty to run in the namespace of
// this process).
type ExecRunner struct {
	Prefix []string
}

var _ Runner = ExecRunner{}

// RunError is a command that failed, with its stderr.
type RunError struct {
	Argv   []string
	Stderr string
	Err    error
}

func (e *RunError) Error() string {
	return fmt.Sprintf("%s: %v: %s", strings.Join(e.Argv, " "), e.Err, strings.TrimSpace(e.Stderr))
}

func (e *RunError) Unwrap() error { return e.Err }

// IsNotFound reports whether err says the binary does not exist.
func IsNotFound(err error) bool { return errors.Is(err, exec.ErrNotFound) }

// Run implements Runner.
func (r ExecRunner) Run(ctx context.Context, argv []string, stdin []byte) ([]byte, error) {
	full := append(append([]string(nil), r.Prefix...), argv...)
	if len(full) == 0 {
		return nil, errors.New("empty command")
	}
	cmd := exec.CommandContext(ctx, full[0], full[1:]...)
	if stdin != nil {
		cmd.Stdin = bytes.NewReader(stdin)
	}
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		return out.Bytes(), &RunError{Argv: argv, Stderr: errb.String(), Err: err}
	}
	return out.Bytes(), nil
}
