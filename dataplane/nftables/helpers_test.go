package nftables

import (
	"context"
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"testing"

	"sigs.k8s.io/knftables"

	"github.com/switchyard-proxy/switchyard/dataplane"
	"github.com/switchyard-proxy/switchyard/dataplane/dataplanetest"
	switchyardv1 "github.com/switchyard-proxy/switchyard/proto/switchyard/v1"
)

// recorder is a knftables.Interface that records the text of every
// transaction it runs and can be told to fail the next one.
type recorder struct {
	knftables.Interface

	mu       sync.Mutex
	txs      []string
	failNext bool
	// onCommit, when set, runs after each transaction that succeeded
	// (the fake kernel's generation, driftfake_test.go).
	onCommit func()
}

func (r *recorder) Run(ctx context.Context, tx *knftables.Transaction) error {
	r.mu.Lock()
	r.txs = append(r.txs, tx.String())
	fail := r.failNext
	r.failNext = false
	r.mu.Unlock()
	if fail {
		return fmt.Errorf("injected failure")
	}
	if err := r.Interface.Run(ctx, tx); err != nil {
		return err
	}
	if r.onCommit != nil {
		r.onCommit()
	}
	return nil
}

func (r *recorder) take() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := r.txs
	r.txs = nil
	return out
}

// fakeBed is a Dataplane over knftables Fakes, one per family.
type fakeBed struct {
	fakes map[dataplane.Family]*knftables.Fake
	rec   map[dataplane.Family]*recorder
	dp    *Dataplane
}

func newFakeBed(t testing.TB, fams ...dataplane.Family) *fakeBed {
	t.Helper()
	if len(fams) == 0 {
		fams = []dataplane.Family{dataplane.IPv4}
	}
	b := &fakeBed{fakes: map[dataplane.Family]*knftables.Fake{}, rec: map[dataplane.Family]*recorder{}}
	ifs := map[dataplane.Family]knftables.Interface{}
	for _, f := range fams {
		b.fakes[f] = knftables.NewFake(nftFamily(f), DefaultTable)
		b.rec[f] = &recorder{Interface: b.fakes[f]}
		ifs[f] = b.rec[f]
	}
	dp, err := New(Config{Interfaces: ifs, Families: fams})
	if err != nil {
		t.Fatal(err)
	}
	b.dp = dp
	return b
}

func (b *fakeBed) apply(t testing.TB, st *dataplane.State, full bool) {
	t.Helper()
	if err := b.dp.Apply(t.Context(), st, dataplane.ApplyOptions{Full: full}); err != nil {
		t.Fatalf("Apply: %v", err)
	}
}

// sortedDump is a Fake's dump with its lines sorted: element order in
// the Fake follows insertion, which differs between a partial and a full
// sync of the same state.
func sortedDump(f *knftables.Fake) string {
	lines := strings.Split(strings.TrimSpace(f.Dump()), "\n")
	slices.Sort(lines)
	return strings.Join(lines, "\n")
}

// freshDump is the sorted dump of st applied once to an empty table.
// With like, the endpoint-map blocks are those like's chains hold (a
// fresh allocator hands them out in name order; an incremental one keeps
// each chain's block), so the dumps compare.
func freshDump(t testing.TB, st *dataplane.State, fam dataplane.Family, like ...*Dataplane) string {
	t.Helper()
	b := newFakeBed(t, fam)
	if len(like) > 0 && like[0].memo[fam] != nil && like[0].memo[fam].slots != nil {
		b.dp.memo[fam] = &Memo{slots: like[0].memo[fam].slots.clone()}
	}
	b.apply(t, st, false)
	return sortedDump(b.fakes[fam])
}

// benchService is service i with eps endpoints; alt moves its last one.
func benchService(i, eps int, alt bool) *switchyardv1.ServiceView {
	sv := &switchyardv1.ServiceView{
		Namespace: "ns", Name: fmt.Sprintf("s%d", i), Type: switchyardv1.ServiceType_SERVICE_TYPE_CLUSTER_IP,
		ClusterIps:      []string{fmt.Sprintf("10.96.%d.%d", i/250, i%250+1)},
		Ports:           []*switchyardv1.ServicePort{{Name: "http", Protocol: switchyardv1.Protocol_PROTOCOL_TCP, Port: 80}},
		HasAnyEndpoints: eps > 0,
	}
	for e := range eps {
		n := i*eps + e
		addr := fmt.Sprintf("10.%d.%d.%d", 128+n/62500, (n/250)%250, n%250+1)
		if alt && e == eps-1 {
			addr = "10.127.0.1"
		}
		sv.ClusterEndpoints = append(sv.ClusterEndpoints, &switchyardv1.Endpoint{
			Address: addr, Ready: true, Serving: true,
			Ports: []*switchyardv1.EndpointPort{{Name: "http", Port: 8080}},
		})
	}
	return sv
}

func stateOf(svcs ...*switchyardv1.ServiceView) *dataplane.State {
	cfg := &switchyardv1.NodeConfig{NodeName: "n", ClusterCidrs: []string{"10.128.0.0/9"}, NodeIps: []string{"10.200.0.10"}}
	return dataplanetest.NewState(cfg, svcs...)
}

func netipMust(s string) netip.AddrPort { return netip.MustParseAddrPort(s) }
