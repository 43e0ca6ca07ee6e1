package nftables

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/protobuf/proto"
	"sigs.k8s.io/knftables"

	"github.com/switchyard-proxy/switchyard/dataplane"
	"github.com/switchyard-proxy/switchyard/dataplane/scenario"
	switchyardv1 "github.com/switchyard-proxy/switchyard/proto/switchyard/v1"
)

func TestFlowDevices(t *testing.T) {
	links := []string{"lo", "eth0", "eth1", "veth12ab", "vethx", "ens3", "cni0", `we"ird`}
	tests := []struct {
		patterns []string
		want     []string
	}{
		{nil, nil},
		{[]string{"eth0"}, []string{"eth0"}},
		{[]string{"eth*", "veth*"}, []string{"eth0", "eth1", "veth12ab", "vethx"}},
		{[]string{"*"}, []string{"cni0", "ens3", "eth0", "eth1", "veth12ab", "vethx"}}, // never loopback
		{[]string{"ens[0-9]", "eth?", "eth0"}, []string{"ens3", "eth0", "eth1"}},
		{[]string{"wlan*"}, nil},
	}
	for _, tc := range tests {
		if diff := cmp.Diff(tc.want, flowDevices(tc.patterns, links)); diff != "" {
			t.Errorf("flowDevices(%q) (-want +got):\n%s", tc.patterns, diff)
		}
	}
}

// flowState is stateOf with the flowtable setting and the node's links.
func flowState(patterns []string, links ...string) *dataplane.State {
	st := stateOf(benchService(1, 2, false))
	st.Config.FlowtableInterfaces = patterns
	st.Links = links
	return st
}

// wantFlowtableRules are the flowtable's lines of a Fake dump.
const wantFlowtableRules = `add flowtable ip switchyard fastpath { hook ingress priority filter ; }
add chain ip switchyard flowtable-forward { type filter hook forward priority 10 ; }
add rule ip switchyard flowtable-forward meta l4proto tcp ct state established ct status dnat flow add @fastpath`

func flowLines(f *knftables.Fake) string {
	var out []string
	for _, l := range strings.Split(f.Dump(), "\n") {
		if strings.Contains(l, "flowtable") || strings.Contains(l, "fastpath") {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}

// TestFlowtableFollowsLinks walks the setting and the node's interfaces
// through their changes: the flowtable and its rule appear with the
// setting, devices are added in a transaction of their own as matching
// interfaces appear, one that goes away costs nothing (the kernel drops
// it), one that stays but no longer matches makes the sync full (the
// flowtable is recreated empty, then refilled), and the setting off
// removes both.
func TestFlowtableFollowsLinks(t *testing.T) {
	b := newFakeBed(t)
	rec, fake := b.rec[dataplane.IPv4], b.fakes[dataplane.IPv4]
	devices := func() []string { return b.dp.FlowtableDevices()[dataplane.IPv4] }

	b.apply(t, flowState([]string{"eth*", "veth*"}, "lo", "eth0", "veth1"), false)
	if diff := cmp.Diff(wantFlowtableRules, flowLines(fake)); diff != "" {
		t.Errorf("flowtable in the table (-want +got):\n%s", diff)
	}
	txs := rec.take()
	if len(txs) != 2 || !strings.Contains(txs[1], "add flowtable ip switchyard fastpath { hook ingress priority filter ; devices = { \"eth0\", \"veth1\" } ; }") {
		t.Errorf("want the main transaction, then the devices' one; got:\n%s", strings.Join(txs, "\n---\n"))
	}
	if diff := cmp.Diff([]string{"eth0", "veth1"}, devices()); diff != "" {
		t.Errorf("devices (-want +got):\n%s", diff)
	}

	// A pod's veth appears: only its device is added.
	b.apply(t, flowState([]string{"eth*", "veth*"}, "lo", "eth0", "veth1", "veth2"), false)
	txs = rec.take()
	if len(txs) != 1 || !strings.Contains(txs[0], `devices = { "veth2" }`) || strings.Contains(txs[0], "chain") {
		t.Errorf("a new interface: want one transaction adding veth2, got:\n%s", strings.Join(txs, "\n---\n"))
	}

	// A veth goes away: the kernel dropped it; nothing to run.
	b.apply(t, flowState([]string{"eth*", "veth*"}, "lo", "eth0", "veth2"), false)
	if txs = rec.take(); len(txs) != 0 {
		t.Errorf("an interface gone: want no transaction, got:\n%s", strings.Join(txs, "\n---\n"))
	}
	if diff := cmp.Diff([]string{"eth0", "veth2"}, devices()); diff != "" {
		t.Errorf("devices after veth1 went (-want +got):\n%s", diff)
	}

	// eth0 stays but no longer matches: recreated, then refilled.
	b.apply(t, flowState([]string{"veth*"}, "lo", "eth0", "veth2"), false)
	txs = rec.take()
	if len(txs) != 2 || !strings.Contains(txs[0], "delete flowtable ip switchyard fastpath") ||
		!strings.Contains(txs[1], `devices = { "veth2" }`) || strings.Contains(txs[1], "eth0") {
		t.Errorf("a device no longer wanted: want the flowtable recreated, then veth2 added; got:\n%s", strings.Join(txs, "\n---\n"))
	}
	if !b.dp.LastSync().Full {
		t.Error("a device no longer wanted did not make the sync full")
	}

	// The setting off: the rule's chain, then the flowtable, go.
	b.apply(t, flowState(nil, "lo", "eth0", "veth2"), false)
	if got := flowLines(fake); got != "" {
		t.Errorf("setting off: flowtable objects left:\n%s", got)
	}
	if got := devices(); len(got) != 0 {
		t.Errorf("setting off: devices %q", got)
	}
	if err := fake.Check(t.Context(), fake.NewTransaction()); err != nil {
		t.Fatal(err)
	}
	// A partial sync equals a fresh load of the same state.
	st := flowState([]string{"veth*"}, "veth9")
	b.apply(t, st, false)
	if diff := cmp.Diff(freshDump(t, st, dataplane.IPv4, b.dp), sortedDump(fake)); diff != "" {
		t.Errorf("partial sync vs fresh load (-fresh +partial):\n%s", diff)
	}
}

// noFlowtables refuses every transaction that holds a flowtable, as
// nft on a kernel without CONFIG_NF_FLOW_TABLE does ("Could not process
// rule: No such file or directory").
type noFlowtables struct {
	knftables.Interface
	checks int
}

var errNoFlowtable = errors.New("Error: Could not process rule: No such file or directory\nadd flowtable ip switchyard fastpath")

func (n *noFlowtables) Run(ctx context.Context, tx *knftables.Transaction) error {
	if strings.Contains(tx.String(), "flowtable") {
		return errNoFlowtable
	}
	return n.Interface.Run(ctx, tx)
}

func (n *noFlowtables) Check(ctx context.Context, tx *knftables.Transaction) error {
	n.checks++
	if strings.Contains(tx.String(), "flowtable") {
		return errNoFlowtable
	}
	return n.Interface.Check(ctx, tx)
}

// TestFlowtableUnsupportedIsASkip: on a kernel without flowtables the
// setting is a counted skip and the services are programmed as
// without it; the kernel is asked again only at full syncs.
func TestFlowtableUnsupportedIsASkip(t *testing.T) {
	fake := knftables.NewFake(knftables.IPv4Family, DefaultTable)
	nf := &noFlowtables{Interface: fake}
	dp, err := New(Config{Interfaces: map[dataplane.Family]knftables.Interface{dataplane.IPv4: nf}, Families: []dataplane.Family{dataplane.IPv4}})
	if err != nil {
		t.Fatal(err)
	}
	st := flowState([]string{"eth*"}, "eth0")
	if err := dp.Apply(t.Context(), st, dataplane.ApplyOptions{}); err != nil {
		t.Fatalf("Apply on a kernel without flowtables: %v", err)
	}
	if s := dp.LastSync(); !s.FlowtableSkipped || s.FlowtableDevices != 0 {
		t.Errorf("LastSync: skipped %v, devices %d; want skipped, none", s.FlowtableSkipped, s.FlowtableDevices)
	}
	if strings.Contains(fake.Dump(), "flowtable") {
		t.Errorf("a flowtable was programmed:\n%s", fake.Dump())
	}
	if diff := cmp.Diff(freshDump(t, stateOf(benchService(1, 2, false)), dataplane.IPv4), sortedDump(fake)); diff != "" {
		t.Errorf("services not programmed as without the setting (-want +got):\n%s", diff)
	}
	st2 := flowState([]string{"eth*"}, "eth0", "eth1")
	if err := dp.Apply(t.Context(), st2, dataplane.ApplyOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := dp.Apply(t.Context(), st2, dataplane.ApplyOptions{Full: true}); err != nil {
		t.Fatal(err)
	}
	if nf.checks != 2 || !dp.LastSync().FlowtableSkipped {
		t.Errorf("probes: %d, want 2 (first sync, then the full one); skipped %v", nf.checks, dp.LastSync().FlowtableSkipped)
	}
}

// TestFlowtableDeviceFailureKeepsServices: the devices' transaction
// failing (an interface gone since the listing) fails nothing else and
// is retried at the next sync.
func TestFlowtableDeviceFailureKeepsServices(t *testing.T) {
	b := newFakeBed(t)
	rec := b.rec[dataplane.IPv4]
	b.apply(t, flowState([]string{"veth*"}, "veth1"), false)
	rec.take()
	st := flowState([]string{"veth*"}, "veth1", "veth2")
	rec.failNext = true
	b.apply(t, st, false) // fails the test if Apply fails
	if s := b.dp.LastSync(); s.FlowtableErrors != 1 || s.FlowtableDevices != 1 {
		t.Errorf("LastSync: errors %d, devices %d; want 1, 1", s.FlowtableErrors, s.FlowtableDevices)
	}
	b.apply(t, st, false)
	if diff := cmp.Diff([]string{"veth1", "veth2"}, b.dp.FlowtableDevices()[dataplane.IPv4]); diff != "" {
		t.Errorf("devices after the retry (-want +got):\n%s", diff)
	}
}

// TestFlowtableDrift: a flowtable deleted behind the mode's back, or a
// device someone added to it, is drift; a full Apply repairs it.
func TestFlowtableDrift(t *testing.T) {
	b, _ := newDriftBed(t)
	st := flowState([]string{"veth*"}, "veth1")
	settled(t, b, st)
	if dr := check(t, b.dp); dr.Drifted() {
		t.Fatalf("drift right after the sync: %v", dr.Detail)
	}
	fake := b.fakes[dataplane.IPv4]
	tx := fake.NewTransaction()
	tx.Flush(&knftables.Chain{Name: chainFlowOffload})
	tx.Delete(&knftables.Flowtable{Name: flowtableName})
	if err := b.rec[dataplane.IPv4].Run(t.Context(), tx); err != nil {
		t.Fatal(err)
	}
	dr := check(t, b.dp)
	if dr.Kinds[dataplane.DriftFlowtable] != 1 || dr.Kinds[dataplane.DriftRule] != 1 {
		t.Errorf("drift %v (%v); want one flowtable and one rule", dr.Kinds, dr.Detail)
	}
	b.apply(t, st, true)
	if got := flowLines(fake); got != wantFlowtableRules {
		t.Errorf("after the repair:\n%s", got)
	}
}

// flowOn is a Dataplane whose every state has the flowtable setting on
// over the links "eth0" and "veth1".
type flowOn struct{ *Dataplane }

func withFlow(st *dataplane.State) *dataplane.State {
	c := *st
	cfg := proto.Clone(st.Config).(*switchyardv1.NodeConfig)
	cfg.FlowtableInterfaces = []string{"eth*", "veth*"}
	c.Config, c.Links = cfg, []string{"lo", "eth0", "veth1"}
	return &c
}

func (f flowOn) Apply(ctx context.Context, st *dataplane.State, opts dataplane.ApplyOptions) error {
	return f.Dataplane.Apply(ctx, withFlow(st), opts)
}

// TestScenariosWithFlowtable: the shared scenarios, with the setting on,
// trace as without it (the tracer's packets are new ones, which the
// offload rule never matches) and every partial sync lands as a fresh
// load of the same state.
func TestScenariosWithFlowtable(t *testing.T) {
	scenario.RunAll(t, func(t *testing.T) scenario.Tracer {
		bed := newFakeBed(t, dataplane.IPv4, dataplane.IPv6)
		s := scenario.NewTracer(flowOn{bed.dp}, fakeTrace(t, bed))
		s.Check = func(t testing.TB, st *dataplane.State, opts dataplane.ApplyOptions) {
			t.Helper()
			for fam, fake := range bed.fakes {
				if !strings.Contains(fake.Dump(), "flowtable-forward") {
					t.Errorf("%s: no flowtable chain with the setting on", fam)
				}
				if got, want := sortedDump(fake), freshDump(t, withFlow(st), fam, bed.dp); got != want {
					t.Errorf("%s table after the sync differs from a fresh load of the same state:\n%s", fam, lineDiff(got, want))
				}
			}
		}
		return s
	}, scenario.AgreeOptions{Probes: scenario.WideProbes, Walk: true})
}
