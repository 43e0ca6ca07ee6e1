package system

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/switchyard-proxy/switchyard/e2e/testbed/netns"
)

// agent is one switchyard-agent, in its node's namespace.
type agent struct {
	node  netns.Node
	state string // --state-dir, kept across restarts
	logs  *lockedBuffer
	proc  *netns.Process
}

// agentArgs is node's agent command line: every replica, comma-separated,
// tried in order.
func (c *Cluster) agentArgs(a *agent) ([]string, error) {
	args := []string{c.bin.Agent,
		"--mode", "iptables", "--control-plane", strings.Join(c.ControlPlaneTargets(), ","),
		"--node-name", a.node.Name, "--state-dir", a.state,
		"--healthz-bind-address", "127.0.0.1:10256", "--metrics-bind-address", "127.0.0.1:10249",
		"--min-sync-period", "100ms",
	}
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
	p, err := c.Topo.Start(c.life, a.node.NS, netns.Cmd{Argv: argv, Stdout: a.logs, Stderr: a.logs})
	if err != nil {
		return fmt.Errorf("start agent on %s: %w", a.node.Name, err)
	}
	c.log.Info("started switchyard-agent", "node", a.node.Name, "ns", a.node.NS, "pid", p.Pid)
	a.proc = p
	return nil
}

func (c *Cluster) newAgent(n netns.Node) *agent {
	return &agent{node: n, state: filepath.Join(c.dir, "agent-"+n.Name), logs: &lockedBuffer{}}
}

// KillAgent sends SIGKILL to node i's agent (kill -9: it cannot clean up)
// and waits until it is reaped. Its rules stay in the node's namespace.
func (c *Cluster) KillAgent(i int) error {
	a := c.agents[i]
	if err := a.proc.Signal(syscall.SIGKILL); err != nil {
		return fmt.Errorf("kill agent on %s: %w", a.node.Name, err)
	}
	<-a.proc.Done()
	c.log.Info("killed switchyard-agent", "node", a.node.Name, "pid", a.proc.Pid)
	return nil
}

// RestartAgent starts node i's agent again, with the same flags and state
// directory, after KillAgent.
func (c *Cluster) RestartAgent(i int) error {
	a := c.agents[i]
	select {
	case <-a.proc.Done():
	default:
		return fmt.Errorf("agent on %s is still running", a.node.Name)
	}
	return c.startAgent(a)
}

// AgentPID returns the PID of node i's agent.
func (c *Cluster) AgentPID(i int) int { return c.agents[i].proc.Pid }

// AgentLogs returns node i's agent output so far, over its restarts.
func (c *Cluster) AgentLogs(i int) string { return c.agents[i].logs.String() }
