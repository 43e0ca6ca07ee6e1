package system

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/switchyard-proxy/switchyard/e2e/testbed/launch"
	"github.com/switchyard-proxy/switchyard/e2e/testbed/netns"
)

// agentStopGrace is how long Close lets an agent shut down before SIGKILL.
const agentStopGrace = 2 * time.Second

// DatapathCanary is every agent's --datapath-canary: a cluster IP no
// test Service uses, and its port.
const DatapathCanary = "10.96.0.200:80"

// agent is one switchyard-agent, in its node's namespace.
type agent struct {
	node    netns.Node
	mode    string // --mode; "iptables" unless RestartAgentAs changed it
	state   string // --state-dir, kept across restarts
	logPath string // output of every start, appended
	proc    *launch.Process
	// extra are flags added to the command line (SetAgentArgs).
	extra []string
}

// agentArgs is node's agent command line: every replica, comma-separated,
// tried in order.
func (c *Cluster) agentArgs(a *agent) ([]string, error) {
	args := []string{c.bin.Agent,
		"--mode", a.mode, "--control-plane", strings.Join(c.ControlPlaneTargets(), ","),
		"--node-name", a.node.Name, "--state-dir", a.state,
		"--healthz-bind-address", "127.0.0.1:10256", "--metrics-bind-address", "127.0.0.1:10249",
		"--min-sync-period", "100ms",
		// The datapath canary (/healthz fails while the rules do not
		// forward), probed every second; its address is in the static
		// band of the Service range (the first 256 addresses of the
		// /16), which the API server gives only to Services that ask.
		"--datapath-canary", DatapathCanary, "--datapath-probe-interval", "1s",
	}
	args = append(args, a.extra...)
	if c.PKI == nil {
		return append(args, "--insecure"), nil
	}
	cert, key, err := c.PKI.NodeFiles(a.node.Name)
	if err != nil {
		return nil, err
	}
	return append(args, "--ca-file", c.PKI.CAFile, "--cert-file", cert, "--key-file", key), nil
}

// startAgent runs node's agent inside the node's namespace until Close
// (or KillAgent).
func (c *Cluster) startAgent(a *agent) error {
	if err := os.MkdirAll(a.state, 0o700); err != nil {
		return err
	}
	argv, err := c.agentArgs(a)
	if err != nil {
		return err
	}
	p, err := launch.Start(c.Topo.Guard(), launch.Spec{Name: "switchyard-agent " + a.node.Name, Argv: argv,
		NetNS: "/run/netns/" + a.node.NS, LogPath: a.logPath})
	if err != nil {
		return fmt.Errorf("start agent on %s: %w", a.node.Name, err)
	}
	c.log.Info("started switchyard-agent", "node", a.node.Name, "ns", a.node.NS, "pid", p.Pid())
	a.proc = p
	return nil
}

func (c *Cluster) newAgent(n netns.Node) *agent {
	return &agent{node: n, mode: "iptables", state: filepath.Join(c.dir, "agent-"+n.Name),
		logPath: filepath.Join(c.dir, "agent-"+n.Name+".log")}
}

// KillAgent sends SIGKILL to node i's agent (kill -9: it cannot clean up)
// and waits until it is reaped. Its rules stay in the node's namespace.
func (c *Cluster) KillAgent(i int) error {
	a := c.agents[i]
	if err := a.proc.Kill(); err != nil {
		return fmt.Errorf("kill agent on %s: %w", a.node.Name, err)
	}
	c.log.Info("killed switchyard-agent", "node", a.node.Name, "pid", a.proc.Pid())
	return nil
}

// RestartAgent starts node i's agent again, with the same flags and state
// directory, after KillAgent.
func (c *Cluster) RestartAgent(i int) error {
	a := c.agents[i]
	if a.proc.Alive() == nil {
		return fmt.Errorf("agent on %s is still running", a.node.Name)
	}
	return c.startAgent(a)
}

// RestartAgentAs starts node i's agent again with --mode mode, its state
// directory and every other flag unchanged, after KillAgent: what changing
// `mode:` in the ConfigMap and restarting the DaemonSet does to a node.
func (c *Cluster) RestartAgentAs(i int, mode string) error {
	c.agents[i].mode = mode
	return c.RestartAgent(i)
}

// SetAgentArgs gives node i's agent extra flags from its next start on
// (RestartAgent), replacing those set before; none restores the defaults.
func (c *Cluster) SetAgentArgs(i int, extra ...string) { c.agents[i].extra = extra }

// AgentStateDir is node i's agent --state-dir.
func (c *Cluster) AgentStateDir(i int) string { return c.agents[i].state }

// RunAgentCleanup runs `switchyard-agent --cleanup --state-dir <its state
// directory>` (plus extra flags) once inside node i's namespace, as an
// uninstall does on a node, and returns its output, log lines included;
// the error carries the exit status (netns.ExitCode).
func (c *Cluster) RunAgentCleanup(ctx context.Context, i int, extra ...string) ([]byte, error) {
	a := c.agents[i]
	argv := append([]string{c.bin.Agent, "--cleanup", "--state-dir", a.state}, extra...)
	c.log.Info("running switchyard-agent --cleanup", "node", a.node.Name, "argv", argv)
	// The redirection runs inside the namespace, in the shell.
	return c.Topo.Exec(ctx, a.node.NS, append([]string{"sh", "-c", `exec "$0" "$@" 2>&1`}, argv...)...)
}

// AgentExited is closed once node i's agent (its current process) has
// exited and been reaped, however it died.
func (c *Cluster) AgentExited(i int) <-chan struct{} { return c.agents[i].proc.Done() }

// AgentPID returns the PID of node i's agent.
func (c *Cluster) AgentPID(i int) int { return c.agents[i].proc.Pid() }

// AgentLogs returns node i's agent output so far, over its restarts.
func (c *Cluster) AgentLogs(i int) string { return readLog(c.agents[i].logPath) }

// readLog returns a process's log file, or why it cannot.
func readLog(path string) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return "(unreadable: " + err.Error() + ")"
	}
	return string(b)
}
