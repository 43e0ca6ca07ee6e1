package nftables

import (
	"context"
	"fmt"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/switchyard-proxy/switchyard/dataplane/dataplanetest"

	"github.com/google/go-cmp/cmp"
	"sigs.k8s.io/knftables"

	"github.com/switchyard-proxy/switchyard/dataplane"
	"github.com/switchyard-proxy/switchyard/dataplane/conntrack"
	switchyardv1 "github.com/switchyard-proxy/switchyard/proto/switchyard/v1"
)

func manyServices(n int) []*switchyardv1.ServiceView {
	out := make([]*switchyardv1.ServiceView, n)
	for i := range out {
		out[i] = benchService(i, 3, false)
	}
	return out
}

func TestSecondApplyRunsNoTransaction(t *testing.T) {
	for _, fams := range [][]dataplane.Family{{dataplane.IPv4}, {dataplane.IPv4, dataplane.IPv6}} {
		t.Run(fmt.Sprint(fams), func(t *testing.T) {
			b := newFakeBed(t, fams...)
			st := dataplanetest.LoadState(t, "no-node-ips")
			b.apply(t, st, false)
			b.apply(t, st, false)
			if s := b.dp.LastSync(); s.Transactions != 0 || s.Operations != 0 {
				t.Errorf("second Apply of the same state: %+v", s)
			}
		})
	}
}

// TestPartialSyncs changes one thing at a time and checks that the one
// transaction holds only that service's objects, and that the table ends
// up exactly as a fresh full sync of the new state would leave it.
func TestPartialSyncs(t *testing.T) {
	sticky := func(sv *switchyardv1.ServiceView) *switchyardv1.ServiceView {
		sv.SessionAffinity = switchyardv1.SessionAffinity_SESSION_AFFINITY_CLIENT_IP
		sv.SessionAffinityTimeoutSeconds = 30
		return sv
	}
	cases := []struct {
		name   string
		change func(svcs []*switchyardv1.ServiceView) []*switchyardv1.ServiceView
		// One of touched must appear in every line of the transaction.
		touched []string
	}{
		{"one endpoint moves", func(s []*switchyardv1.ServiceView) []*switchyardv1.ServiceView {
			s[7] = benchService(7, 3, true)
			return s
		}, []string{"ns/s7/"}},
		{"service added", func(s []*switchyardv1.ServiceView) []*switchyardv1.ServiceView {
			return append(s, benchService(50, 3, false))
		}, []string{"ns/s50/", "10.96.0.51 "}},
		{"service removed", func(s []*switchyardv1.ServiceView) []*switchyardv1.ServiceView {
			return s[:49]
		}, []string{"ns/s49/", "10.96.0.50 "}},
		{"endpoints all gone", func(s []*switchyardv1.ServiceView) []*switchyardv1.ServiceView {
			s[3] = benchService(3, 0, false)
			return s
		}, []string{"ns/s3/", "10.96.0.4 "}},
		{"affinity turned on", func(s []*switchyardv1.ServiceView) []*switchyardv1.ServiceView {
			s[5] = sticky(benchService(5, 3, false))
			return s
		}, []string{"ns/s5/"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			b := newFakeBed(t)
			svcs := manyServices(50)
			b.apply(t, stateOf(svcs...), false)
			b.rec[dataplane.IPv4].take()
			before := stateOf(svcs...)
			next := stateOf(tc.change(slices.Clone(svcs))...)
			// Hairpin pairs of the changed service's endpoints, old and
			// new, belong to it too.
			for _, st := range []*dataplane.State{before, next} {
				for name, sv := range st.Services {
					if !strings.Contains(tc.touched[0], name+"/") {
						continue
					}
					for _, ep := range sv.ClusterEndpoints {
						tc.touched = append(tc.touched, "{ "+ep.Address+" . "+ep.Address+" }")
					}
				}
			}
			// So are the ranges of its chains' blocks in the endpoint
			// maps, before and after.
			blockOf := func() {
				for chain, ref := range b.dp.memo[dataplane.IPv4].slots.byChain {
					if strings.Contains(chain, tc.touched[0]) {
						for k := range b.dp.applied[dataplane.IPv4].Elements[endpointMap(ref.proto, ref.block)] {
							if lo, _, _ := strings.Cut(k, "-"); lo != "" {
								if v, err := strconv.ParseUint(lo, 10, 32); err == nil && uint32(v)/slots == ref.block {
									tc.touched = append(tc.touched, "{ "+k+" ")
								}
							}
						}
					}
				}
			}
			blockOf()
			b.apply(t, next, false)
			blockOf()
			txs := b.rec[dataplane.IPv4].take()
			if len(txs) != 1 {
				t.Fatalf("%d transactions, want 1", len(txs))
			}
			lines := strings.Split(strings.TrimSpace(txs[0]), "\n")
			for _, l := range lines {
				if strings.Contains(l, "chain ip switchyard services") || strings.HasPrefix(l, "add rule ip switchyard services ") {
					t.Errorf("top-level chain rewritten: %s", l)
				}
				if !slices.ContainsFunc(tc.touched, func(s string) bool { return strings.Contains(l, s) }) {
					t.Errorf("line outside the changed service: %s", l)
				}
			}
			if len(lines) > 30 {
				t.Errorf("%d operations for one service:\n%s", len(lines), txs[0])
			}
			if d := cmp.Diff(freshDump(t, next, dataplane.IPv4, b.dp), sortedDump(b.fakes[dataplane.IPv4])); d != "" {
				t.Errorf("table after partial sync differs from a fresh one (-fresh +got):\n%s", d)
			}
			t.Logf("%d operations:\n%s", len(lines), txs[0])
		})
	}
}

func TestFullResyncRepairsDrift(t *testing.T) {
	b := newFakeBed(t)
	svcs := manyServices(5)
	st := stateOf(svcs...)
	b.apply(t, st, false)
	fake := b.fakes[dataplane.IPv4]
	// Someone empties a service chain and deletes an element.
	tx := fake.NewTransaction()
	n := namesFor("ns", "s1", "http", dataplane.TCP)
	tx.Flush(&knftables.Chain{Name: n.svc})
	tx.Delete(&knftables.Element{Map: mapServiceIPs, Key: []string{"10.96.0.3", "tcp", "80"}})
	if err := fake.Run(t.Context(), tx); err != nil {
		t.Fatal(err)
	}
	b.apply(t, st, false)
	if s := b.dp.LastSync(); s.Transactions != 0 {
		t.Fatalf("partial sync noticed drift it cannot see: %+v", s)
	}
	b.apply(t, st, true)
	if d := cmp.Diff(freshDump(t, st, dataplane.IPv4), sortedDump(fake)); d != "" {
		t.Errorf("full resync did not repair (-fresh +got):\n%s", d)
	}
}

func TestRestartRemovesLeftoversAndKeepsAffinitySets(t *testing.T) {
	fake := knftables.NewFake(knftables.IPv4Family, DefaultTable)
	newDP := func() *Dataplane {
		dp, err := New(Config{Interfaces: map[dataplane.Family]knftables.Interface{dataplane.IPv4: fake}, Families: []dataplane.Family{dataplane.IPv4}})
		if err != nil {
			t.Fatal(err)
		}
		return dp
	}
	svcs := manyServices(6)
	svcs[0].SessionAffinity = switchyardv1.SessionAffinity_SESSION_AFFINITY_CLIENT_IP
	svcs[0].SessionAffinityTimeoutSeconds = 60
	if err := newDP().Apply(t.Context(), stateOf(svcs...), dataplane.ApplyOptions{}); err != nil {
		t.Fatal(err)
	}
	// A learned client in an affinity set must survive a restart.
	aff := namesFor("ns", "s0", "http", dataplane.TCP).affinitySet(netip.MustParseAddrPort("10.128.0.1:8080"), 60)
	tx := fake.NewTransaction()
	tx.Add(&knftables.Element{Set: aff, Key: []string{"10.200.0.2"}})
	if err := fake.Run(t.Context(), tx); err != nil {
		t.Fatal(err)
	}
	// The restarted agent no longer has s4 and s5.
	st := stateOf(svcs[:4]...)
	if err := newDP().Apply(t.Context(), st, dataplane.ApplyOptions{}); err != nil {
		t.Fatal(err)
	}
	got := sortedDump(fake)
	if strings.Contains(got, "ns/s4/") || strings.Contains(got, "ns/s5/") {
		t.Errorf("leftovers of removed services:\n%s", got)
	}
	if !strings.Contains(got, "{ 10.200.0.2 }") {
		t.Errorf("affinity entry lost on restart")
	}
}

func TestFailedApplyMakesNextOneFull(t *testing.T) {
	b := newFakeBed(t)
	svcs := manyServices(3)
	b.apply(t, stateOf(svcs...), false)
	b.rec[dataplane.IPv4].failNext = true
	svcs[1] = benchService(1, 3, true)
	if err := b.dp.Apply(t.Context(), stateOf(svcs...), dataplane.ApplyOptions{}); err == nil {
		t.Fatal("injected failure not reported")
	}
	b.apply(t, stateOf(svcs...), false)
	if s := b.dp.LastSync(); !s.Full {
		t.Errorf("sync after a failure was not full: %+v", s)
	}
	if d := cmp.Diff(freshDump(t, stateOf(svcs...), dataplane.IPv4, b.dp), sortedDump(b.fakes[dataplane.IPv4])); d != "" {
		t.Errorf("(-fresh +got):\n%s", d)
	}
}

func TestCleanupDeletesTable(t *testing.T) {
	b := newFakeBed(t, dataplane.IPv4, dataplane.IPv6)
	if err := b.dp.Cleanup(t.Context()); err != nil {
		t.Fatalf("Cleanup of nothing: %v", err)
	}
	b.apply(t, dataplanetest.LoadState(t, "dual-stack"), false)
	if err := b.dp.Cleanup(t.Context()); err != nil {
		t.Fatal(err)
	}
	for f, fake := range b.fakes {
		if d := fake.Dump(); d != "" {
			t.Errorf("%s: table left after Cleanup:\n%s", f, d)
		}
	}
	b.apply(t, dataplanetest.LoadState(t, "dual-stack"), false)
	if s := b.dp.LastSync(); !s.Full {
		t.Error("Apply after Cleanup was not full")
	}
}

type cleanerFunc func(fam dataplane.Family, flows []conntrack.Flow) error

func (f cleanerFunc) DeleteUDP(_ context.Context, fam dataplane.Family, flows []conntrack.Flow) error {
	return f(fam, flows)
}

func TestRemovedUDPEndpointClearsConntrack(t *testing.T) {
	var got []conntrack.Flow
	fake := knftables.NewFake(knftables.IPv4Family, DefaultTable)
	dp, err := New(Config{Interfaces: map[dataplane.Family]knftables.Interface{dataplane.IPv4: fake}, Families: []dataplane.Family{dataplane.IPv4},
		Conntrack: cleanerFunc(func(_ dataplane.Family, flows []conntrack.Flow) error {
			got = append(got, flows...)
			return nil
		})})
	if err != nil {
		t.Fatal(err)
	}
	dns := func(alt bool) *dataplane.State {
		sv := benchService(0, 2, alt)
		sv.Ports[0].Protocol = switchyardv1.Protocol_PROTOCOL_UDP
		return stateOf(sv)
	}
	for _, alt := range []bool{false, true} {
		if err := dp.Apply(t.Context(), dns(alt), dataplane.ApplyOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	want := []conntrack.Flow{{Dst: netip.MustParseAddrPort("10.96.0.1:80"), Endpoint: netip.MustParseAddrPort("10.128.0.2:8080")}}
	if d := cmp.Diff(want, got, cmp.Comparer(func(a, b netip.Addr) bool { return a == b }),
		cmp.Comparer(func(a, b netip.AddrPort) bool { return a == b })); d != "" {
		t.Errorf("flows (-want +got):\n%s", d)
	}
}
