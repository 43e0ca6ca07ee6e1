package nftables

import (
	"net/netip"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/switchyard-proxy/switchyard/dataplane"
	"github.com/switchyard-proxy/switchyard/dataplane/dataplanetest"
	switchyardv1 "github.com/switchyard-proxy/switchyard/proto/switchyard/v1"
)

// sameRuleset fails the test when a memo render differs from a fresh
// one in anything Apply uses.
func sameRuleset(t *testing.T, want, got *Ruleset) {
	t.Helper()
	if d := cmp.Diff(want, got, cmp.AllowUnexported(Ruleset{}), cmpopts.EquateComparable(netip.Addr{}, netip.AddrPort{})); d != "" {
		t.Fatalf("memo render differs from a fresh Render (-fresh +memo):\n%s", d)
	}
}

func TestMemoMatchesFreshRenderOnGoldens(t *testing.T) {
	for _, name := range dataplanetest.Cases(t, "testdata/*/want.nft") {
		t.Run(name, func(t *testing.T) {
			st := dataplanetest.LoadState(t, name)
			for _, fam := range []dataplane.Family{dataplane.IPv4, dataplane.IPv6} {
				want, err := Render(st, fam)
				if err != nil {
					t.Fatal(err)
				}
				m := &Memo{}
				for pass := range 2 {
					got, err := render(st, fam, m, false)
					if err != nil {
						t.Fatal(err)
					}
					sameRuleset(t, want, got)
					if pass == 1 && m.Rendered != 0 {
						t.Errorf("second render of the same state rendered %d services", m.Rendered)
					}
				}
			}
		})
	}
}

// TestMemoFollowsChanges walks a sequence of changes (endpoint moves,
// services added and removed, affinity on, node config changed) and
// checks every memo render against a fresh one, and that only the
// changed services are rendered again.
func TestMemoFollowsChanges(t *testing.T) {
	svcs := manyServices(30)
	m := &Memo{}
	step := func(name string, wantRendered int, st *dataplane.State) {
		t.Helper()
		got, err := render(st, dataplane.IPv4, m, false)
		if err != nil {
			t.Fatal(err)
		}
		want, err := renderWith(st, dataplane.IPv4, m.slots.clone())
		if err != nil {
			t.Fatal(err)
		}
		sameRuleset(t, want, got)
		if wantRendered >= 0 && m.Rendered != wantRendered {
			t.Errorf("%s: rendered %d services, want %d", name, m.Rendered, wantRendered)
		}
	}
	step("first", 30, stateOf(svcs...))
	svcs[4] = benchService(4, 3, true)
	step("one endpoint moves", 1, stateOf(svcs...))
	svcs = append(svcs, benchService(40, 2, false))
	step("service added", 1, stateOf(svcs...))
	svcs = svcs[1:]
	step("service removed", 0, stateOf(svcs...))
	sticky := benchService(9, 3, false)
	sticky.SessionAffinity = switchyardv1.SessionAffinity_SESSION_AFFINITY_CLIENT_IP
	sticky.SessionAffinityTimeoutSeconds = 60
	svcs[8] = sticky
	step("affinity on", 1, stateOf(svcs...))
	svcs[0] = benchService(1, 0, false) // svcs[0] is s1
	step("endpoints gone", 1, stateOf(svcs...))
	// A service sharing s2's endpoints: their hairpin pairs stay when it
	// goes.
	shared := benchService(50, 0, false)
	shared.ClusterEndpoints, shared.HasAnyEndpoints = svcs[1].ClusterEndpoints, true
	svcs = append(svcs, shared)
	step("shared endpoints", 1, stateOf(svcs...))
	svcs = svcs[:len(svcs)-1]
	step("sharing service gone", 0, stateOf(svcs...))
	st := stateOf(svcs...)
	st.Config.ClusterCidrs = []string{"10.128.0.0/10"}
	step("node config changed", len(svcs), st)
}
