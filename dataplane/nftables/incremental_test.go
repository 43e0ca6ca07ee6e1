package nftables

import (
	"fmt"
	"math/rand/v2"
	"net/netip"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/switchyard-proxy/switchyard/dataplane"
	"github.com/switchyard-proxy/switchyard/dataplane/dataplanetest"
	switchyardv1 "github.com/switchyard-proxy/switchyard/proto/switchyard/v1"
)

// TestIncrementalSyncsMatchFreshTables drives 120 random changes through
// partial syncs (the incremental path) and checks after each one that
// the table and the applied ruleset are exactly what a fresh full sync
// of the same state gives. The changes include services that share
// endpoints and service IPs (shared elements with several owners),
// affinity, no endpoints, a bad service, and the other algorithms
// (round-robin; maglev with a small table of its own, whose slots move
// between the endpoint and maglev maps as a service changes algorithm).
// Every other sync carries the hint of the one service it changes.
func TestIncrementalSyncsMatchFreshTables(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	const n = 24
	svcs := map[string]*switchyardv1.ServiceView{}
	for i := range n {
		sv := benchService(i, 3, false)
		svcs[sv.Name] = sv
	}
	b := newFakeBed(t, dataplane.IPv4, dataplane.IPv6)
	state := func() []*switchyardv1.ServiceView {
		var out []*switchyardv1.ServiceView
		for _, sv := range svcs {
			out = append(out, sv)
		}
		return out
	}
	b.apply(t, stateOf(state()...), false)
	for step := range 120 {
		i := rng.IntN(n + 4)
		name := fmt.Sprintf("s%d", i)
		var what string
		switch k := rng.IntN(9); k {
		case 0:
			what = "endpoint moves"
			svcs[name] = benchService(i, 3, rng.IntN(2) == 0)
		case 1:
			what = "removed"
			delete(svcs, name)
		case 2:
			what = "endpoints vary"
			svcs[name] = benchService(i, rng.IntN(6), false)
		case 3:
			what = "shares another's endpoints and IP"
			other := benchService(rng.IntN(n), 3, false)
			sv := benchService(i, 0, false)
			sv.ClusterEndpoints, sv.HasAnyEndpoints = other.ClusterEndpoints, true
			if rng.IntN(2) == 0 {
				sv.ClusterIps = other.ClusterIps
			}
			svcs[name] = sv
		case 4:
			what = "affinity"
			sv := benchService(i, 3, false)
			sv.SessionAffinity = switchyardv1.SessionAffinity_SESSION_AFFINITY_CLIENT_IP
			sv.SessionAffinityTimeoutSeconds = uint32(10 + rng.IntN(3))
			svcs[name] = sv
		case 5:
			what = "bad"
			sv := benchService(i, 2, false)
			sv.ClusterIps = []string{"not-an-ip"}
			svcs[name] = sv
		case 6:
			what = "dual-stack endpoint"
			sv := benchService(i, 2, false)
			sv.ClusterIps = append(sv.ClusterIps, fmt.Sprintf("fd00:96::%x", i+1))
			sv.ClusterEndpoints = append(sv.ClusterEndpoints, &switchyardv1.Endpoint{
				Address: fmt.Sprintf("fd00:244::%x", i+1), Ready: true, Serving: true,
				Ports: []*switchyardv1.EndpointPort{{Name: "http", Port: 8080}}})
			svcs[name] = sv
		case 7:
			what = "round-robin"
			sv := benchService(i, 1+rng.IntN(4), rng.IntN(2) == 0)
			sv.LoadBalancing = switchyardv1.LoadBalancing_LOAD_BALANCING_ROUND_ROBIN
			svcs[name] = sv
		case 8:
			what = "maglev"
			sv := benchService(i, 1+rng.IntN(4), rng.IntN(2) == 0)
			withTable(t, sv, []int{13, 17}[rng.IntN(2)])
			svcs[name] = sv
		}
		st := stateOf(state()...)
		// Every 25th sync is a full resync, which rebuilds the owners
		// from scratch (shared keys may have several by then).
		full := step%25 == 24
		opts := dataplane.ApplyOptions{Full: full}
		if step%2 == 0 {
			opts.Changed = map[string]struct{}{"ns/" + name: {}}
		}
		if err := b.dp.Apply(t.Context(), st, opts); err != nil {
			t.Fatalf("step %d (%s %s): %v", step, name, what, err)
		}
		if s := b.dp.LastSync(); s.Full != full {
			t.Fatalf("step %d (%s %s): sync full=%v, want %v", step, name, what, s.Full, full)
		}
		for _, fam := range []dataplane.Family{dataplane.IPv4, dataplane.IPv6} {
			if d := cmp.Diff(freshDump(t, st, fam, b.dp), sortedDump(b.fakes[fam])); d != "" {
				t.Fatalf("step %d (%s %s), %v: table differs from a fresh sync (-fresh +incremental):\n%s", step, name, what, fam, d)
			}
			want, err := renderWith(st, fam, b.dp.memo[fam].slots.clone())
			if err != nil {
				t.Fatal(err)
			}
			if d := cmp.Diff(want, b.dp.applied[fam], cmp.AllowUnexported(Ruleset{}),
				cmpopts.EquateComparable(netip.Addr{}, netip.AddrPort{}), cmpopts.EquateEmpty()); d != "" {
				t.Fatalf("step %d (%s %s), %v: applied ruleset differs from Render (-render +incremental):\n%s", step, name, what, fam, d)
			}
		}
	}
}

// withTable makes sv maglev with a table of size slots over its
// endpoints, as the control plane computes one (smaller, so the test
// stays fast: agents take any size).
func withTable(t *testing.T, sv *switchyardv1.ServiceView, size int) {
	t.Helper()
	var ids []string
	for _, ep := range sv.ClusterEndpoints {
		ids = append(ids, netip.AddrPortFrom(netip.MustParseAddr(ep.Address), uint16(ep.Ports[0].Port)).String())
	}
	mt, _ := dataplanetest.MaglevTable(t, sv.Ports[0].Name, size, ids...)
	sv.LoadBalancing = switchyardv1.LoadBalancing_LOAD_BALANCING_MAGLEV
	sv.MaglevTables = []*switchyardv1.MaglevTable{mt}
}
