package syncer

import (
	"maps"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/switchyard-proxy/switchyard/dataplane"
	"github.com/switchyard-proxy/switchyard/nodeagent/internal/view"
	switchyardv1 "github.com/switchyard-proxy/switchyard/proto/switchyard/v1"
)

// ownDecorator adds "own/canary", whose cluster IP follows the
// NodeConfig's first node IP, as the datapath canary's endpoint does.
type ownDecorator struct {
	mu      sync.Mutex
	changed []map[string]struct{}
	built   map[string]*switchyardv1.ServiceView
}

const own = "own/canary"

func (d *ownDecorator) Decorate(st *dataplane.State, changed map[string]struct{}) []string {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.changed = append(d.changed, changed)
	ip := "none"
	if ips := st.Config.GetNodeIps(); len(ips) > 0 {
		ip = ips[0]
	}
	if d.built[ip] == nil {
		d.built[ip] = &switchyardv1.ServiceView{Namespace: "own", Name: "canary", ClusterIps: []string{ip}}
	}
	st.Services[own] = d.built[ip]
	return []string{own}
}

// savingJournal keeps the names each Save was told changed.
type savingJournal struct {
	mu    sync.Mutex
	saved []map[string]struct{}
}

func (j *savingJournal) Intend(*view.Update) error { return nil }

func (j *savingJournal) Save(_ *view.View, changed map[string]struct{}) error {
	j.mu.Lock()
	defer j.mu.Unlock()
	j.saved = append(j.saved, maps.Clone(changed))
	return nil
}

func nodeIPConfig(ip string) *switchyardv1.Resource {
	return &switchyardv1.Resource{Name: "node-a", Version: ip, Body: &switchyardv1.Resource_NodeConfig{NodeConfig: &switchyardv1.NodeConfig{
		NodeName: "node-a", NodeIps: []string{ip},
	}}}
}

// TestDecoratorOwnServices: the decorator's service reaches every Apply,
// replaces the view's of the same name, and stays out of the applied
// view, the journal and OnApplied; a partial sync's hint names it only
// when it changed (here: the node's address moved).
func TestDecoratorOwnServices(t *testing.T) {
	dec := &ownDecorator{built: map[string]*switchyardv1.ServiceView{}}
	j := &savingJournal{}
	var (
		mu        sync.Mutex
		onApplied []map[string]struct{}
	)
	h := newHarness(t, nil, false, func(_ *harness, c *Config) {
		c.Decorator, c.Journal = dec, j
		c.OnApplied = func(_ *view.View, changed map[string]struct{}) {
			mu.Lock()
			defer mu.Unlock()
			onApplied = append(onApplied, changed)
		}
	})
	if h.s.Synced() {
		t.Error("Synced before any sync")
	}
	steps := []*view.Update{
		update("s1", nodeIPConfig("10.0.0.1"), svc("ns/a", "1")),
		// The control plane's Service of the same name: the decorator's wins.
		update("s2", &switchyardv1.Resource{Name: own, Version: "1", Body: &switchyardv1.Resource_Service{Service: &switchyardv1.ServiceView{
			Namespace: "own", Name: "canary", ClusterIps: []string{"10.0.0.99"}}}}),
		update("s3", svc("ns/b", "1")),
		update("s4", nodeIPConfig("10.0.0.2")),
	}
	for _, u := range steps {
		if _, err := h.s.Apply(t.Context(), u); err != nil {
			t.Fatal(err)
		}
		h.clk.Step(time.Second)
	}
	if !h.s.Synced() {
		t.Error("not Synced after a sync")
	}
	var hints [][]string
	for _, c := range h.dp(dry).Calls() {
		if c.Opts.Changed == nil {
			hints = append(hints, nil)
			continue
		}
		hints = append(hints, slices.Sorted(maps.Keys(c.Opts.Changed)))
	}
	want := [][]string{nil, {own}, {"ns/b"}, {"node-a", own}}
	if diff := cmp.Diff(want, hints); diff != "" {
		t.Errorf("hints (-want +got):\n%s", diff)
	}
	applied := h.dp(dry).Applied()
	if got := applied.Services[own].GetClusterIps(); !slices.Equal(got, []string{"10.0.0.2"}) {
		t.Errorf("applied %s has cluster IPs %v, want the decorator's 10.0.0.2", own, got)
	}
	// The view keeps what the control plane sent: its versions are
	// announced and ACKed, and the journal restores it.
	if r := h.s.Applied().Resources[own]; r.GetService().GetClusterIps()[0] != "10.0.0.99" {
		t.Errorf("the applied view's %s = %v, want the control plane's", own, r)
	}
	wantSaved := []map[string]struct{}{{"node-a": {}, "ns/a": {}}, {own: {}}, {"ns/b": {}}, {"node-a": {}}}
	j.mu.Lock()
	if diff := cmp.Diff(wantSaved, j.saved); diff != "" {
		t.Errorf("journal saves (-want +got):\n%s", diff)
	}
	j.mu.Unlock()
	mu.Lock()
	defer mu.Unlock()
	wantOnApplied := []map[string]struct{}{nil, {own: {}}, {"ns/b": {}}, {"node-a": {}}}
	if diff := cmp.Diff(wantOnApplied, onApplied); diff != "" {
		t.Errorf("OnApplied names (-want +got):\n%s", diff)
	}
	dec.mu.Lock()
	defer dec.mu.Unlock()
	if diff := cmp.Diff(wantOnApplied, dec.changed); diff != "" {
		t.Errorf("Decorate's changed (-want +got):\n%s", diff)
	}
}
