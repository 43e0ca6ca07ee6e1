package nftables

import (
	"net/netip"
	"slices"
	"strings"
	"testing"

	"github.com/switchyard-proxy/switchyard/dataplane"
	"github.com/switchyard-proxy/switchyard/dataplane/nftables"
	"github.com/switchyard-proxy/switchyard/e2e/dataplane/dptest"
	"github.com/switchyard-proxy/switchyard/e2e/testbed/netns"
)

func TestMain(m *testing.M) { dptest.Main(m) }

// runnerOptions fork nft from a thread inside the node namespace (see
// dptest.RunnerOptions.Fork: "ip netns exec" would drown the numbers we
// measure) and record the input of every "nft -f" in nftInputs.
var runnerOptions = dptest.RunnerOptions{Fork: true, Record: record}

// nftInputs logs the input of every "nft -f"; nftLists every nft run
// that lists (its arguments).
const (
	nftInputs = "nft -f"
	nftLists  = "nft list"
)

func record(argv []string, stdin []byte) (log, entry string) {
	switch {
	case len(argv) > 1 && argv[1] == "-f":
		return nftInputs, string(stdin)
	case slices.Contains(argv, "list"):
		return nftLists, strings.Join(argv, " ")
	}
	return "", ""
}

type bed struct {
	*dptest.Bed
	dp *nftables.Dataplane
}

// newBed is an IPv4-only bed.
func newBed(t *testing.T) *bed {
	t.Helper()
	return newBedFor(t, dataplane.IPv4, false)
}

// newBedFor is the bed of a family's test (dptest.NewBedFor); with
// cleanup its Dataplane deletes stale UDP conntrack entries, through
// netlink in the node namespace, as the agent does.
func newBedFor(t *testing.T, f dataplane.Family, cleanup bool) *bed {
	t.Helper()
	b := &bed{Bed: dptest.NewBedFor(t, f, runnerOptions)}
	b.dp = b.newDP(t, nftables.Config{Conntrack: b.Conntrack(t, cleanup)})
	return b
}

// modeBed is this mode's dptest.ModeBed.
func modeBed(t *testing.T, f dataplane.Family, cleanup bool) (*dptest.Bed, dptest.Apply) {
	b := newBedFor(t, f, cleanup)
	return b.Bed, b.apply
}

// newDP builds a Dataplane on the bed's runner: IPv4 only, or the ip and
// ip6 tables on a dual-stack bed.
func (b *bed) newDP(t *testing.T, cfg nftables.Config) *nftables.Dataplane {
	t.Helper()
	cfg.Runner, cfg.Families, cfg.Logger = b.Runner, b.NodeFamilies(), netns.TestLogger(t)
	dp, err := nftables.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return dp
}

func (b *bed) apply(t *testing.T, st *dataplane.State) {
	t.Helper()
	dptest.MustApply(t, b.dp, st)
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

// listTables is listTable followed, on a dual-stack bed, by "nft list
// table ip6 switchyard".
func (b *bed) listTables(t *testing.T) string {
	t.Helper()
	out := b.listTable(t)
	if b.DualStack() {
		six, err := b.Topo.Exec(t.Context(), b.Node.NS, "nft", "list", "table", "ip6", nftables.DefaultTable)
		if err != nil {
			t.Fatal(err)
		}
		out += string(six)
	}
	return out
}

var vip = netip.MustParseAddrPort("10.96.0.10:80")
