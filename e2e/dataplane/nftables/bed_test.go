package nftables

import (
	"net/netip"
	"os"
	"testing"

	"github.com/switchyard-proxy/switchyard/dataplane"
	"github.com/switchyard-proxy/switchyard/dataplane/nftables"
	"github.com/switchyard-proxy/switchyard/e2e/dataplane/dptest"
	"github.com/switchyard-proxy/switchyard/e2e/testbed/echo"
	"github.com/switchyard-proxy/switchyard/e2e/testbed/netns"
)

func TestMain(m *testing.M) {
	if code, ok := echo.RunChild(); ok {
		os.Exit(code)
	}
	os.Exit(m.Run())
}

// runnerOptions fork nft from a thread inside the node namespace (see
// dptest.RunnerOptions.Fork: "ip netns exec" would drown the numbers we
// measure) and record the input of every "nft -f" in nftInputs.
var runnerOptions = dptest.RunnerOptions{Fork: true, Record: record}

const nftInputs = "nft -f"

func record(argv []string, stdin []byte) (log, entry string) {
	if len(argv) > 1 && argv[1] == "-f" {
		return nftInputs, string(stdin)
	}
	return "", ""
}

type bed struct {
	*dptest.Bed
	dp *nftables.Dataplane
}

func newBed(t *testing.T) *bed {
	t.Helper()
	b := &bed{Bed: dptest.NewBed(t, runnerOptions)}
	b.dp = b.newDP(t, nftables.Config{})
	return b
}

// newDP builds a Dataplane on the bed's runner, IPv4 only.
func (b *bed) newDP(t *testing.T, cfg nftables.Config) *nftables.Dataplane {
	t.Helper()
	cfg.Runner, cfg.Families, cfg.Logger = b.Runner, []nftables.Family{nftables.IPv4}, netns.TestLogger(t)
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
	out, err := b.Topo.Exec(t.Context(), b.Node.NS, "nft", "list", "table", "ip", nftables.DefaultTable)
	if err != nil {
		t.Fatal(err)
	}
	return string(out)
}

var vip = netip.MustParseAddrPort("10.96.0.10:80")
