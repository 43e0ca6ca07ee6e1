package nodeview

import (
	"net/netip"
	"testing"
	"time"

	switchyardv1 "github.com/switchyard-proxy/switchyard/proto/switchyard/v1"

	"github.com/switchyard-proxy/switchyard/controlplane/internal/model"
)

func TestSettingsHash(t *testing.T) {
	base := Defaults{
		Mode: switchyardv1.DataplaneMode_DATAPLANE_MODE_NFTABLES, MinSyncPeriod: time.Second, SyncPeriod: time.Hour,
		IPVSScheduler: "rr", ClusterCIDRs: []netip.Prefix{netip.MustParsePrefix("10.244.0.0/16")},
		MasqueradeAll: true, NodePortAddresses: []string{"primary"},
	}
	hash := func(d Defaults) string { return NewIndex(nil, Options{Defaults: d}).SettingsHash() }
	want := hash(base)
	if want == "" || !versionRE.MatchString(want) {
		t.Fatalf("settings hash %q is not 16 hex digits", want)
	}
	if again := hash(base); again != want {
		t.Errorf("same settings, hashes %s and %s", want, again)
	}
	// Each field counts: changing any one changes the hash.
	tests := []struct {
		name string
		edit func(*Defaults)
	}{
		{"mode", func(d *Defaults) { d.Mode = switchyardv1.DataplaneMode_DATAPLANE_MODE_IPTABLES }},
		{"min sync period", func(d *Defaults) { d.MinSyncPeriod = 2 * time.Second }},
		{"sync period", func(d *Defaults) { d.SyncPeriod = 0 }},
		{"ipvs scheduler", func(d *Defaults) { d.IPVSScheduler = "wrr" }},
		{"cluster CIDRs", func(d *Defaults) { d.ClusterCIDRs = nil }},
		{"masquerade all", func(d *Defaults) { d.MasqueradeAll = false }},
		{"node port addresses", func(d *Defaults) { d.NodePortAddresses = []string{"all"} }},
		{"flowtable interfaces", func(d *Defaults) { d.FlowtableInterfaces = []string{"veth*"} }},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			d := base
			tc.edit(&d)
			if got := hash(d); got == want {
				t.Errorf("hash unchanged (%s)", got)
			}
		})
	}
}

// TestWithDefaults: new settings rebuild every NodeConfig, leave the
// service views shared, and give exactly the versions a fresh Index with
// those settings gives (a replica that read the new settings at start).
func TestWithDefaults(t *testing.T) {
	st := webState("n1@a", "n2@b")
	iptables := Defaults{Mode: switchyardv1.DataplaneMode_DATAPLANE_MODE_IPTABLES}
	nft := Defaults{Mode: switchyardv1.DataplaneMode_DATAPLANE_MODE_NFTABLES}
	ix := NewIndex(st, Options{Defaults: iptables})

	same, changed := ix.WithDefaults(iptables)
	if changed || same != ix {
		t.Errorf("same settings: changed %v, same Index %v; want false, true", changed, same == ix)
	}
	next, changed := ix.WithDefaults(nft)
	if !changed {
		t.Fatal("new mode: WithDefaults reports no change")
	}
	fresh := NewIndex(st, Options{Defaults: nft})
	for _, node := range []string{"n1", "n2", "unknown"} {
		got, want := next.Node(node), fresh.Node(node)
		if got.Version() != want.Version() {
			t.Errorf("%s: version %s after WithDefaults, %s from a fresh Index", node, got.Version(), want.Version())
		}
		if m := configOf(t, got.Config()).GetMode(); m != nft.Mode {
			t.Errorf("%s: mode %v, want %v", node, m, nft.Mode)
		}
		if old := configOf(t, ix.Node(node).Config()).GetMode(); old != iptables.Mode {
			t.Errorf("%s: the old Index changed: mode %v", node, old)
		}
		if got.get("ns/web") != ix.Node(node).get("ns/web") {
			t.Errorf("%s: service view not shared with the old Index", node)
		}
	}
	// An Update after WithDefaults keeps the new settings.
	st.Nodes = nodesOf("n1@a", "n2@b", "n3@a")
	after, _ := next.Update(st, nil, []string{"n3"})
	if got, want := after.Node("n3").Version(), NewIndex(st, Options{Defaults: nft}).Node("n3").Version(); got != want {
		t.Errorf("n3 after Update: version %s, want %s", got, want)
	}
}

// TestWithSettingsPerNode: settings of its own change that node's
// NodeConfig only (its hash among them), survive Updates, and taking them
// back changes it again; the same plan twice is no change.
func TestWithSettingsPerNode(t *testing.T) {
	st := model.NewState()
	st.Nodes = nodesOf("n1@a", "n2@b", "n3@a")
	iptables := Defaults{Mode: switchyardv1.DataplaneMode_DATAPLANE_MODE_IPTABLES}
	nft := Defaults{Mode: switchyardv1.DataplaneMode_DATAPLANE_MODE_NFTABLES}
	ix := NewIndex(st, Options{Defaults: iptables})

	plan := Settings{Defaults: iptables, PerNode: map[string]Defaults{"n2": nft, "n3": iptables}}
	next, all, changed := ix.WithSettings(plan)
	if all || len(changed) != 1 || changed[0] != "n2" {
		t.Fatalf("WithSettings: all %t, changed %v; want only n2 (n3's settings are the cluster's)", all, changed)
	}
	if m := configOf(t, next.Node("n2").Config()).GetMode(); m != nft.Mode {
		t.Errorf("n2 mode %v", m)
	}
	if h, own := next.NodeSettingsHash("n2"); !own || h != SettingsHash(nft) || configOf(t, next.Node("n2").Config()).GetSettingsHash() != h {
		t.Errorf("n2 settings hash %s (own %t), want %s in its NodeConfig", h, own, SettingsHash(nft))
	}
	for _, n := range []string{"n1", "n3"} {
		if next.Node(n).Version() != ix.Node(n).Version() {
			t.Errorf("%s changed", n)
		}
	}
	if same, all, changed := next.WithSettings(plan); same != next || all || changed != nil {
		t.Errorf("the same plan again: a new Index %t, all %t, changed %v", same != next, all, changed)
	}
	st.Nodes = nodesOf("n1@a", "n2@a", "n3@a")
	after, _ := next.Update(st, nil, []string{"n2"})
	if m := configOf(t, after.Node("n2").Config()).GetMode(); m != nft.Mode {
		t.Errorf("n2 lost its settings in an Update: mode %v", m)
	}
	back, all, changed := after.WithSettings(Settings{Defaults: iptables})
	if all || len(changed) != 1 || changed[0] != "n2" || configOf(t, back.Node("n2").Config()).GetMode() != iptables.Mode {
		t.Errorf("taking n2's settings back: all %t changed %v", all, changed)
	}
	if got, want := back.Node("n2").Version(), NewIndex(st, Options{Defaults: iptables}).Node("n2").Version(); got != want {
		t.Errorf("n2 back on the cluster's settings: version %s, fresh Index %s", got, want)
	}
}
