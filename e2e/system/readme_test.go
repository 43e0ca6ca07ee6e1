package system_test

import (
	"bytes"
	"context"
	"fmt"
	"maps"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/switchyard-proxy/switchyard/e2e/internal/checkout"
	"github.com/switchyard-proxy/switchyard/e2e/system"
	"github.com/switchyard-proxy/switchyard/e2e/testbed/launch"
	"github.com/switchyard-proxy/switchyard/e2e/testbed/readme"
)

// The addresses the README's examples spell, which the test replaces by
// its cluster's: in the commands README → test, in their output test →
// README.
const (
	readmeControlPlane = "localhost:18000"
	// readmeCanary is the datapath canary's cluster IP in the README
	// (and deploy/base/agent.yaml); the cluster's is system.DatapathCanary.
	readmeCanary = "10.96.0.250"
)

// nodeExample is a README example that needs agents: what the test does
// to the cluster first (the break the README describes), and where the
// example's commands run.
type nodeExample struct {
	name string
	// node is the index of the node whose namespace the commands run in
	// (curl 127.0.0.1:10256 on that node), or operator: the machine's own
	// namespace, where the control plane listens (grpcurl, switchyardctl).
	node int
	// prepare brings the cluster into the state the README shows; the
	// cleanups it registers undo it before the next example.
	prepare func(t *testing.T, e *env)
}

// operator runs an example's commands where an operator would: the
// machine's namespace, beside the control plane.
const operator = -1

// nodeExamples are the README's examples that need real agents, by name,
// run in this order, each after its own break; add an example here.
var nodeExamples = []nodeExample{
	{name: "drift", node: operator, prepare: prepareDrift},
	{name: "datapath-healthz", node: 1, prepare: prepareForeignDrop},
	{name: "ctl-service", node: operator, prepare: prepareServiceChange},
	{name: "ctl-rollout", node: operator, prepare: prepareRollout},
}

// prepareServiceChange changes the echo Service's endpoints and waits
// until both nodes acknowledged the change: it is live on every node,
// with a latency sample from each.
func prepareServiceChange(t *testing.T, e *env) {
	ctx := t.Context()
	before, err := e.c.ServiceAt(ctx, 0, system.Namespace, system.ServiceName)
	if err != nil {
		t.Fatal(err)
	}
	if err := e.c.ScaleTo(ctx, e.c.Topo.Pods()); err != nil {
		t.Fatal(err)
	}
	// The answer from before the change may already read "2 of 2,
	// measured" (an earlier change's samples): wait for the new version.
	waitFor(ctx, t, "the change live on both nodes, measured", func() (bool, string) {
		resp, err := e.c.ServiceAt(ctx, 0, system.Namespace, system.ServiceName)
		if err != nil {
			return false, err.Error()
		}
		moved := len(resp.GetNodes()) > 0
		for i, n := range resp.GetNodes() {
			if i < len(before.GetNodes()) && n.GetDesiredVersion() == before.GetNodes()[i].GetDesiredVersion() {
				moved = false
			}
		}
		return moved && resp.GetAppliedNodes() == 2 && resp.GetLatencySamples() == 2, resp.GetSummary()
	})
}

// readmeRollout is the README's rollout, with a pause long enough to
// hold it at its canary step while the example runs.
const readmeRollout = `mode: iptables
rollout:
  name: to-nftables
  settings: {mode: nftables}
  canaryNodes: [node-0]
  pause: 1h
`

// prepareRollout starts the README's rollout and waits until its canary
// applied it: the rollout pauses before its next step.
func prepareRollout(t *testing.T, e *env) {
	ctx := t.Context()
	if err := e.c.PutSettings(ctx, readmeRollout); err != nil {
		t.Fatal(err)
	}
	waitFor(ctx, t, "the canary applies the rollout", func() (bool, string) {
		r, err := e.c.RolloutAt(ctx, 0)
		if err != nil {
			return false, err.Error()
		}
		return r.GetState() == "pausing" && r.GetAppliedNodes() == 1, r.GetSummary()
	})
}

// TestREADMEExamples runs the README's examples that need real agents in a
// plaintext cluster of two nodes (iptables mode, the datapath canary on):
// each after breaking a node the way its section says, its commands as
// printed but for the addresses (the control plane's, the canary's), in a
// node's namespace for the commands that run on a node, and compares what
// they print with the README's output: JSON decoded, text with runs of
// blanks as one, timestamps and content hashes as "…" in both
// (e2e/testbed/readme). e2e/controlplane's TestREADMEExamples runs the
// ones that need only the control plane.
func TestREADMEExamples(t *testing.T) {
	examples := checkout.Examples(t)
	for _, x := range nodeExamples {
		ex, ok := examples[x.name]
		if !ok {
			t.Fatalf("README has no example %q", x.name)
		}
		for _, c := range ex.Commands {
			exampleTools(t, c) // skips (fails in CI) before the cluster starts
		}
	}
	e := &env{c: startClusterAs(t, system.Config{Nodes: 2, Pods: 2, Settings: "mode: iptables\n"})}
	reserveCanary(t, e, netip.MustParseAddrPort(system.DatapathCanary))
	for _, n := range e.c.Topo.Nodes() {
		e.waitHealthz(t.Context(), t, n, 200, `"datapathHealthy":true`)
	}
	canary := netip.MustParseAddrPort(system.DatapathCanary).Addr().String()
	toREADME := strings.NewReplacer(e.c.Target, readmeControlPlane, canary, readmeCanary)
	fromREADME := strings.NewReplacer(readmeControlPlane, e.c.Target, readmeCanary, canary)
	for _, x := range nodeExamples {
		ex := examples[x.name]
		ok := t.Run(x.name, func(t *testing.T) {
			x.prepare(t, e)
			var out []byte
			for _, c := range ex.Commands {
				b, err := e.runExample(t, x.node, fromREADME.Replace(c))
				if err != nil {
					t.Fatalf("%s: %v\n%s", c, err, b)
				}
				out = append(out, b...)
			}
			got := toREADME.Replace(string(out))
			t.Logf("README example %q prints:\n%s", x.name, got)
			compareExample(t, ex, got)
		})
		if !ok && t.Context().Err() != nil {
			return
		}
	}
}

// compareExample compares what example ex printed with the README's
// output block.
func compareExample(t *testing.T, ex readme.Example, got string) {
	t.Helper()
	switch {
	case ex.Output != "":
		want, err := readme.JSON(ex.Output)
		if err != nil {
			t.Fatalf("README example %q: its json block: %v", ex.Name, err)
		}
		have, err := readme.JSON(got)
		if err != nil {
			t.Fatalf("README example %q: its output: %v\n%s", ex.Name, err, got)
		}
		if d := cmp.Diff(want, have); d != "" {
			t.Errorf("README example %q prints otherwise (-README +got):\n%s", ex.Name, d)
		}
	case ex.Text != "":
		if !readme.SameText(ex.Text, got) {
			t.Errorf("README example %q prints otherwise (-README +got):\n%s", ex.Name,
				cmp.Diff(readme.Normalize(ex.Text), readme.Normalize(got)))
		}
	default:
		t.Errorf("README example %q shows no output to compare", ex.Name)
	}
}

// runExample runs one command of an example with sh, on node (its
// namespace, through ip netns exec) or on the operator's machine, with
// the tools it names first in PATH, and returns what it printed on
// standard output; the error carries standard error.
func (e *env) runExample(t *testing.T, node int, command string) ([]byte, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	path := os.Getenv("PATH")
	if tools := exampleTools(t, command); tools != "" {
		path = tools + ":" + path
	}
	if node != operator {
		return e.c.Topo.Exec(ctx, e.c.Topo.Node(node).NS, "env", "PATH="+path, "sh", "-c", command)
	}
	cmd := exec.CommandContext(ctx, "sh", "-c", command)
	cmd.Env = append(os.Environ(), "PATH="+path)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err == nil && stderr.Len() > 0 {
		err = fmt.Errorf("standard error: %s", stderr.Bytes())
	} else if err != nil {
		err = fmt.Errorf("%w: %s", err, stderr.Bytes())
	}
	return out, err
}

// exampleTools is the PATH entries a command's tools need that are not
// the machine's own: grpcurl from bin/ (make tools; the example skips
// without it, or fails in CI), switchyardctl built from the workspace;
// jq and curl are the machine's own, Debian's packages of those names.
func exampleTools(t *testing.T, command string) string {
	t.Helper()
	var dirs []string
	for _, word := range strings.Fields(command) {
		switch word {
		case "grpcurl":
			dirs = append(dirs, filepath.Dir(checkout.Grpcurl(t)))
		case "switchyardctl":
			dirs = append(dirs, filepath.Dir(toolSwitchyardctl(t)))
		case "jq", "curl":
			if _, err := exec.LookPath(word); err != nil {
				checkout.Missing(t, word+" missing: apt-get install "+word)
			}
		}
	}
	slices.Sort(dirs)
	return strings.Join(slices.Compact(dirs), ":")
}

// toolSwitchyardctl builds switchyardctl once into the run's binDir.
func toolSwitchyardctl(t *testing.T) string {
	t.Helper()
	p, err := buildSwitchyardctl()
	if err != nil {
		t.Fatal(err)
	}
	return p
}

var buildSwitchyardctl = sync.OnceValues(func() (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	out, err := launch.Build(ctx, filepath.Join(binDir, "ctl"), nil,
		"github.com/switchyard-proxy/switchyard/controlplane/cmd/switchyardctl")
	if err != nil {
		return "", err
	}
	return out[0], nil
})

// prepareDrift flushes node-0's nat table (a firewall reload), waits
// until its agent's drift check repaired it, then changes the view so
// that every agent ACKs again: ACKs carry the drift report ListNodes
// shows.
func prepareDrift(t *testing.T, e *env) {
	ctx := t.Context()
	n0 := e.c.Topo.Node(0)
	repairs := e.agentMetric(ctx, t, n0, "switchyard_agent_drift_repairs_total")
	e.run(ctx, t, n0, [][]string{{"iptables", "-t", "nat", "-F"}})
	waitFor(ctx, t, "node-0's drift repaired", func() (bool, string) {
		n := e.agentMetric(ctx, t, n0, "switchyard_agent_drift_repairs_total")
		return n > repairs, fmt.Sprint(n)
	})
	e.waitHealthz(ctx, t, n0, 200, `"datapathHealthy":true`)
	if err := e.c.ScaleTo(ctx, e.c.Topo.Pods()[:1]); err != nil {
		t.Fatal(err)
	}
	waitFor(ctx, t, "every node reported its drift checks, node-0 its repair", func() (bool, string) {
		nodes, err := e.nodes(ctx)
		if err != nil {
			return false, err.Error()
		}
		if !system.Settled(slices.Collect(maps.Values(nodes)), e.c.NodeNames()) {
			return false, "not settled"
		}
		for _, n := range e.c.Topo.Nodes() {
			d := nodes[n.Name].GetDrift()
			if d.GetLastCheck() == nil || (n.Index == 0) != (d.GetRepairs() > 0) {
				return false, fmt.Sprintf("%s: %v", n.Name, d)
			}
		}
		return true, ""
	})
}

// prepareForeignDrop puts a foreign DROP of the canary's address in front
// of node-1's rules (raw OUTPUT, before the nat table's DNAT) and waits
// until its /healthz says so; the DROP goes when the example ends.
func prepareForeignDrop(t *testing.T, e *env) {
	ctx := t.Context()
	n1 := e.c.Topo.Node(1)
	vip := netip.MustParseAddrPort(system.DatapathCanary).Addr().String()
	drop := func(op string) []string {
		return []string{"iptables", "-t", "raw", op, "OUTPUT", "-d", vip + "/32", "-p", "tcp", "-j", "DROP"}
	}
	e.run(ctx, t, n1, [][]string{drop("-I")})
	t.Cleanup(func() {
		ctx := context.WithoutCancel(ctx)
		e.run(ctx, t, n1, [][]string{drop("-D")})
		e.waitHealthz(ctx, t, n1, 200, `"datapathHealthy":true`)
	})
	e.waitHealthz(ctx, t, n1, 503, `"datapathHealthy":false`)
}
