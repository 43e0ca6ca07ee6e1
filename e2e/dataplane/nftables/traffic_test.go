package nftables

import (
	"net/netip"
	"strings"
	"testing"

	"github.com/switchyard-proxy/switchyard/dataplane"
	"github.com/switchyard-proxy/switchyard/dataplane/nftables"
	"github.com/switchyard-proxy/switchyard/e2e/dataplane/dptest"
	"github.com/switchyard-proxy/switchyard/e2e/testbed/probe"
)

// TestPortWithoutEndpointsRefused: endpoints are decided per service port
// (issue 17). A two-port service whose slices name one port refuses the
// other at once, on its cluster IP and node port, while the first serves.
func TestPortWithoutEndpointsRefused(t *testing.T) {
	b := newBed(t)
	b.CheckPortWithoutEndpoints(t, vip.Addr(), b.apply)
}

func TestPartialSyncTouchesOnlyChangedObjects(t *testing.T) {
	b := newBed(t)
	svcs := dptest.ManyServices(50, b.Pods...)
	b.apply(t, dptest.State(b.Node, svcs...))
	before := blocksOf(b.listTable(t))
	b.Runner.Take(nftInputs)

	svcs[7] = dptest.Service("s7", "10.96.1.8", 80, 0, b.Pods[0], b.Pods[1]) // one endpoint gone
	b.apply(t, dptest.State(b.Node, svcs...))
	txs := b.Runner.Take(nftInputs)
	if len(txs) != 1 {
		t.Fatalf("want one transaction, got %d", len(txs))
	}
	for _, l := range strings.Split(strings.TrimSpace(txs[0]), "\n") {
		if !strings.Contains(l, "endpoints-tcp") {
			t.Errorf("transaction touches another object: %s", l)
		}
		if !strings.HasPrefix(l, "add element ") && !strings.HasPrefix(l, "delete element ") {
			t.Errorf("an endpoint change must be map elements only, got: %s", l)
		}
	}
	t.Logf("transaction:\n%s", txs[0])
	// The kernel agrees: no chain changed (so the commit validated no
	// chain), only the endpoint map. The removed pod still serves the
	// other 49 services, so its hairpin pair stays.
	after := blocksOf(b.listTable(t))
	changed := dptest.Changed(before, after)
	if len(changed) != 1 || !strings.HasPrefix(changed[0], "map endpoints-tcp-") {
		t.Errorf("kernel shows changed %v, want only one TCP endpoint map", changed)
	}
	b.CheckAnsweredBy(t, b.Node.NS, netip.MustParseAddrPort("10.96.1.8:80"), 20, 2, "after partial sync")
}

func TestSecondApplyIsNoopFullResyncAndCleanup(t *testing.T) {
	dptest.ForFamilies(t, func(t *testing.T, f dataplane.Family) {
		b := newBedFor(t, f, false)
		secondApplyFullResyncCleanup(t, b)
	})
}

// secondApplyFullResyncCleanup applies every rule form (in both families
// on a dual-stack bed, each service with an address of each): a second
// Apply runs no transaction, a full resync leaves the tables as they
// were, a restarted agent deletes what its first state lacks, and
// Cleanup removes our tables and only ours.
func secondApplyFullResyncCleanup(t *testing.T, b *bed) {
	foreign := "add table ip foreign\nadd chain ip foreign c\nadd rule ip foreign c tcp dport 9 return\n"
	if _, err := b.Runner.Run(t.Context(), []string{"nft", "-f", "-"}, []byte(foreign)); err != nil {
		t.Fatal(err)
	}
	st := b.RuleFormState()
	b.apply(t, st)
	b.Runner.Take(nftInputs)
	b.apply(t, st)
	if txs := b.Runner.Take(nftInputs); len(txs) != 0 {
		t.Errorf("second Apply of the same state ran %d transactions", len(txs))
	}
	listed := b.listTables(t)
	if b.DualStack() && !strings.Contains(listed, "table ip6 "+nftables.DefaultTable) {
		t.Fatalf("no ip6 table on a dual-stack bed:\n%s", listed)
	}
	if err := b.dp.Apply(t.Context(), st, dataplane.ApplyOptions{Full: true}); err != nil {
		t.Fatalf("full resync: %v", err)
	}
	if again := b.listTables(t); again != listed {
		t.Errorf("full resync of an unchanged state changed the tables:\nbefore:\n%s\nafter:\n%s", listed, again)
	}
	// A restarted agent reconciles (lists, rewrites, deletes leftovers),
	// whether it lists the table with nft or over netlink.
	web := st.Services["default/web"]
	var restarted *nftables.Dataplane
	for _, c := range []struct {
		listing string
		cfg     nftables.Config
	}{{"nft", nftables.Config{}}, {"netlink", nftables.Config{PartialNetlink: nsNetlink(b.Topo, b.Node.NS)}}} {
		b.apply(t, st) // the leftovers back
		if got := b.listTables(t); !strings.Contains(got, "default/sticky/") {
			t.Fatalf("%s: the full state is not in the kernel:\n%s", c.listing, got)
		}
		restarted = b.newDP(t, c.cfg)
		b.Runner.Take(nftLists)
		if err := restarted.Apply(t.Context(), dptest.State(b.Node, web), dataplane.ApplyOptions{}); err != nil {
			t.Fatalf("%s listing: first Apply after restart: %v", c.listing, err)
		}
		if lists := b.Runner.Take(nftLists); (len(lists) > 0) != (c.listing == "nft") {
			t.Errorf("%s listing: nft listed %d times: %q", c.listing, len(lists), lists)
		}
		if got := b.listTables(t); strings.Contains(got, "default/sticky/") || strings.Contains(got, "default/lb/") {
			t.Errorf("%s listing: leftovers after restart:\n%s", c.listing, got)
		}
		b.dp = restarted
	}
	if err := restarted.Cleanup(t.Context()); err != nil {
		t.Fatal(err)
	}
	out, err := b.Topo.Exec(t.Context(), b.Node.NS, "nft", "list", "tables")
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(out), "switchyard") || !strings.Contains(string(out), "table ip foreign") {
		t.Errorf("after Cleanup: %s", out)
	}
	// Traffic no longer reaches the service, in any of its families.
	for _, ip := range web.ClusterIps {
		dst := netip.AddrPortFrom(netip.MustParseAddr(ip), 80)
		res, err := probe.New(b.Topo, b.Node.NS).TCP(t.Context(), dst, probe.Options{Count: 1})
		if err != nil || res.Succeeded() != 0 {
			t.Errorf("%v still answers after Cleanup: %v %v", dst, err, res)
		}
	}
}

// TestRunnerStaysInNodeNamespace guards the fork-from-a-thread runner:
// the table must appear in the node namespace and nowhere else we can see.
func TestRunnerStaysInNodeNamespace(t *testing.T) {
	b := newBed(t)
	b.apply(t, dptest.State(b.Node, dptest.Service("web", vip.Addr().String(), 80, 0, b.Pods...)))
	for _, ns := range []string{b.Topo.Client().NS, b.Pods[0].NS} {
		out, err := b.Topo.Exec(t.Context(), ns, "nft", "list", "tables")
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(string(out), "switchyard") {
			t.Errorf("table leaked into %s", ns)
		}
	}
	if !strings.Contains(b.listTable(t), "chain services") {
		t.Error("table not in the node namespace")
	}
}

// TestHairpinThroughTheVIP: a pod whose Service sends it back to itself
// gets its own reply, masqueraded to the node (the hairpin-endpoints set
// in postrouting; without it the reply would go pod-to-pod and be
// dropped as not matching the connection), in both families
// (dptest.CheckHairpin).
func TestHairpinThroughTheVIP(t *testing.T) {
	dptest.ForFamilies(t, func(t *testing.T, f dataplane.Family) {
		b := newBedFor(t, f, false)
		b.CheckHairpin(t, b.apply)
	})
}
