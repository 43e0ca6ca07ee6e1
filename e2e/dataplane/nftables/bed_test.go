package nftables

import (
	"bytes"
	"context"
	"net/netip"
	"os"
	"os/exec"
	"sync"
	"testing"
	"time"

	"github.com/switchyard-proxy/switchyard/dataplane"
	"github.com/switchyard-proxy/switchyard/dataplane/nftables"
	"github.com/switchyard-proxy/switchyard/e2e/testbed/echo"
	"github.com/switchyard-proxy/switchyard/e2e/testbed/netns"
)

func TestMain(m *testing.M) {
	if code, ok := echo.RunChild(); ok {
		os.Exit(code)
	}
	os.Exit(m.Run())
}

// nsRunner runs nft in one namespace of the topology. It forks nft from a
// thread that entered the namespace (Topology.Do), which costs what the
// agent's own exec costs; "ip netns exec" would add 15–140 ms of mount
// setup per command on this machine and drown the numbers we measure.
// It records the input of every "nft -f".
type nsRunner struct {
	topo *netns.Topology
	ns   string

	mu     sync.Mutex
	inputs []string
	// cpu is the user+system time of every command run: with the load
	// of a shared machine, wall time is mostly waiting for a CPU, while
	// the kernel's commit work is charged to nft's system time.
	cpu time.Duration
}

func (r *nsRunner) Run(ctx context.Context, argv []string, stdin []byte) ([]byte, error) {
	if len(argv) > 1 && argv[1] == "-f" {
		r.mu.Lock()
		r.inputs = append(r.inputs, string(stdin))
		r.mu.Unlock()
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
		return out.Bytes(), &nftables.RunError{Argv: argv, Stderr: errb.String(), Err: err}
	}
	return out.Bytes(), nil
}

func (r *nsRunner) takeCPU() time.Duration {
	r.mu.Lock()
	defer r.mu.Unlock()
	c := r.cpu
	r.cpu = 0
	return c
}

func (r *nsRunner) take() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := r.inputs
	r.inputs = nil
	return out
}

type bed struct {
	topo   *netns.Topology
	node   netns.Node
	pods   []netns.Pod
	runner *nsRunner
	dp     *nftables.Dataplane
}

func newBed(t *testing.T) *bed {
	t.Helper()
	topo := netns.New(t, netns.Spec{Nodes: 1, Pods: 3})
	if _, err := echo.StartPods(t.Context(), echo.Launcher{Topo: topo}, topo.Pods(),
		echo.Config{TCP: ":8080", UDP: ":8080", ReportClient: true}); err != nil {
		t.Fatalf("echo servers: %v", err)
	}
	node := topo.Node(0)
	r := &nsRunner{topo: topo, ns: node.NS}
	b := &bed{topo: topo, node: node, pods: topo.Pods(), runner: r}
	b.dp = b.newDP(t, nftables.Config{})
	return b
}

// newDP builds a Dataplane on the bed's runner, IPv4 only.
func (b *bed) newDP(t *testing.T, cfg nftables.Config) *nftables.Dataplane {
	t.Helper()
	cfg.Runner, cfg.Families, cfg.Logger = b.runner, []nftables.Family{nftables.IPv4}, netns.TestLogger(t)
	dp, err := nftables.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return dp
}

func (b *bed) apply(t *testing.T, st *dataplane.State) {
	t.Helper()
	if err := b.dp.Apply(t.Context(), st, dataplane.ApplyOptions{}); err != nil {
		t.Fatalf("Apply: %v", err)
	}
}

// listTable returns "nft list table ip switchyard" in the node namespace
// (through ip netns exec, independent of the runner under test).
func (b *bed) listTable(t *testing.T) string {
	t.Helper()
	out, err := b.topo.Exec(t.Context(), b.node.NS, "nft", "list", "table", "ip", nftables.DefaultTable)
	if err != nil {
		t.Fatal(err)
	}
	return string(out)
}

var vip = netip.MustParseAddrPort("10.96.0.10:80")
