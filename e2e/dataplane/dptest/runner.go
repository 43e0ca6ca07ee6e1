package dptest

import (
	"bytes"
	"context"
	"os/exec"
	"sync"
	"time"

	"github.com/switchyard-proxy/switchyard/dataplane/command"
	"github.com/switchyard-proxy/switchyard/e2e/testbed/netns"
)

// RunnerOptions say how a Runner runs a mode's commands and which of them
// it records.
type RunnerOptions struct {
	// Fork forks each command from a thread that entered the namespace
	// (Topology.Do), which costs what the agent's own exec costs, and
	// sums the commands' CPU time (TakeCPU); a failure is a
	// *command.RunError. Without Fork commands run through "ip netns
	// exec" (Topology.ExecInput), which adds 15–140 ms of mount setup
	// per command on this machine and hides the command's own CPU time
	// behind ip's; a failure is a *netns.ExecError.
	Fork bool
	// Record picks the commands a test wants to see: it returns the log
	// the command goes to and the entry to append there (see Take), or
	// log "" for a command not recorded. Nil records nothing.
	Record func(argv []string, stdin []byte) (log, entry string)
}

// Runner is a command.Runner that runs every command in one namespace of
// a topology, as its RunnerOptions say, and keeps what they record.
type Runner struct {
	topo *netns.Topology
	ns   string
	opts RunnerOptions

	mu   sync.Mutex
	logs map[string][]string
	// cpu is the user+system time of every command forked: with the
	// load of a shared machine, wall time is mostly waiting for a CPU,
	// while the kernel's work is charged to the command's system time.
	cpu time.Duration
}

var _ command.Runner = (*Runner)(nil)

// NewRunner returns a Runner for namespace ns of topo.
func NewRunner(topo *netns.Topology, ns string, o RunnerOptions) *Runner {
	return &Runner{topo: topo, ns: ns, opts: o, logs: map[string][]string{}}
}

// Run implements command.Runner.
func (r *Runner) Run(ctx context.Context, argv []string, stdin []byte) ([]byte, error) {
	if r.opts.Record != nil {
		if log, entry := r.opts.Record(argv, stdin); log != "" {
			r.mu.Lock()
			r.logs[log] = append(r.logs[log], entry)
			r.mu.Unlock()
		}
	}
	if !r.opts.Fork {
		return r.topo.ExecInput(ctx, r.ns, bytes.NewReader(stdin), argv...)
	}
	var out, errb bytes.Buffer
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = bytes.NewReader(stdin), &out, &errb
	err := r.topo.Do(r.ns, cmd.Run)
	if cmd.ProcessState != nil {
		r.mu.Lock()
		r.cpu += cmd.ProcessState.UserTime() + cmd.ProcessState.SystemTime()
		r.mu.Unlock()
	}
	if err != nil {
		return out.Bytes(), &command.RunError{Argv: argv, Stderr: errb.String(), Err: err}
	}
	return out.Bytes(), nil
}

// Take returns the entries recorded in log since the last Take of it, and
// forgets them.
func (r *Runner) Take(log string) []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := r.logs[log]
	delete(r.logs, log)
	return out
}

// TakeCPU returns the CPU time of the commands forked since the last
// TakeCPU, and resets it.
func (r *Runner) TakeCPU() time.Duration {
	r.mu.Lock()
	defer r.mu.Unlock()
	c := r.cpu
	r.cpu = 0
	return c
}
