package nodeview

import (
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/switchyard-proxy/switchyard/controlplane/internal/model"
)

func key(name string) model.ServiceKey { return model.ServiceKey{Namespace: "ns", Name: name} }

// replaceEP replaces, in a copy of the service's only slice, the endpoint
// at i by f(copy of it).
func replaceEP(st *model.State, svc string, i int, f func(*model.Endpoint)) {
	for sk, s := range st.Slices[key(svc)] {
		c := *s
		c.Endpoints = append([]model.Endpoint(nil), s.Endpoints...)
		f(&c.Endpoints[i])
		st.Slices[key(svc)][sk] = &c
	}
}

// updateCase is one edit of smallState (plain, lb: ETP Local on n1 and
// n2, hinted: zones a and b, itp: ITP Local on n2; nodes n1@a, n2@b,
// n3@a) and exactly what Update must report for it.
type updateCase struct {
	name     string
	edit     func(st *model.State)
	services []string
	nodes    []string
	want     Changes
	// recomputed are the services whose views may be new pointers; every
	// other service must be reused.
	recomputed []string
}

func TestUpdateServiceChanges(t *testing.T) {
	runUpdateCases(t, []updateCase{{
		name:       "endpoint of a plain service: its name, for every node",
		edit:       func(st *model.State) { replaceEP(st, "plain", 0, notReady) },
		services:   []string{"plain"},
		want:       Changes{Names: []string{"ns/plain"}},
		recomputed: []string{"plain"},
	}, {
		name:       "ITP Local endpoint starts terminating: only its node",
		edit:       func(st *model.State) { replaceEP(st, "itp", 0, servingTerminating) },
		services:   []string{"itp"},
		want:       Changes{Nodes: map[string][]string{"n2": {"ns/itp"}}},
		recomputed: []string{"itp"},
	}, {
		name: "hints move from zone b to zone a: only zones a and b",
		edit: func(st *model.State) {
			replaceEP(st, "hinted", 1, func(e *model.Endpoint) { e.HintZones = []string{"a"} })
		},
		services:   []string{"hinted"},
		want:       Changes{Zones: map[string][]string{"a": {"ns/hinted"}, "b": {"ns/hinted"}}},
		recomputed: []string{"hinted"},
	}, {
		name:       "service removed",
		edit:       func(st *model.State) { delete(st.Services, key("lb")) },
		services:   []string{"lb"},
		want:       Changes{Removed: []string{"ns/lb"}},
		recomputed: []string{"lb"},
	}, {
		name: "service added",
		edit: func(st *model.State) {
			st.Services[key("new")] = newSvc("new")
		},
		services:   []string{"new"},
		want:       Changes{Names: []string{"ns/new"}},
		recomputed: []string{"new"},
	}})
}

func TestUpdateNodeChanges(t *testing.T) {
	runUpdateCases(t, []updateCase{{
		name:     "listed but unchanged: nothing, everything reused",
		edit:     func(*model.State) {},
		services: []string{"plain", "lb", "missing"},
		nodes:    []string{"n1", "nobody"},
	}, {
		name: "node addresses change: its config only, no service recomputed",
		edit: func(st *model.State) {
			st.Nodes["n3"] = &model.Node{Name: "n3", Zone: "a", Addresses: addrs("192.168.0.3")}
		},
		nodes: []string{"n3"},
		want:  Changes{ConfigNodes: []string{"n3"}},
	}, {
		name:  "node moves to another zone: its config and the zone views it inherits",
		edit:  func(st *model.State) { st.Nodes["n3"] = &model.Node{Name: "n3", Zone: "b"} },
		nodes: []string{"n3"},
		want: Changes{
			ConfigNodes: []string{"n3"},
			Nodes:       map[string][]string{"n3": {"ns/hinted"}},
		},
	}, {
		name:  "hosting node moves: its services without zone hints are not recomputed",
		edit:  func(st *model.State) { st.Nodes["n1"] = &model.Node{Name: "n1", Zone: "b"} },
		nodes: []string{"n1"},
		want: Changes{
			ConfigNodes: []string{"n1"},
			Nodes:       map[string][]string{"n1": {"ns/hinted"}},
		},
	}, {
		name: "node moves into a zone of a service added in the same batch",
		edit: func(st *model.State) {
			svc := newSvc("new")
			st.Services[svc.Key] = svc
			st.Slices[svc.Key] = slicesOf(newSlice("new", "new-x", httpPort,
				newEP("10.0.5.1", "n1", "a", zones("a")), newEP("10.0.5.2", "n2", "b", zones("b"))))
			st.Nodes["n3"] = &model.Node{Name: "n3", Zone: "b"}
		},
		services:   []string{"new"},
		nodes:      []string{"n3"},
		recomputed: []string{"new"},
		want: Changes{
			Names:       []string{"ns/new"},
			ConfigNodes: []string{"n3"},
			Nodes:       map[string][]string{"n3": {"ns/hinted", "ns/new"}},
		},
	}, {
		name:  "node removed: it keeps its own views, loses its zone",
		edit:  func(st *model.State) { delete(st.Nodes, "n2") },
		nodes: []string{"n2"},
		want: Changes{
			ConfigNodes: []string{"n2"},
			Nodes:       map[string][]string{"n2": {"ns/hinted"}},
		},
	}})
}

// checkUpdate updates ix to st, the named services and nodes listed as
// changed, and checks the Changes it reports.
func checkUpdate(t *testing.T, ix *Index, st *model.State, services, nodes []string, want Changes) (*Index, Changes) {
	t.Helper()
	var keys []model.ServiceKey
	for _, s := range services {
		keys = append(keys, key(s))
	}
	next, got := ix.Update(st, keys, nodes)
	if diff := cmp.Diff(want, got, cmpopts.EquateEmpty()); diff != "" {
		t.Errorf("Changes (-want +got):\n%s", diff)
	}
	return next, got
}

// configNodes are the nodes whose NodeConfigs the config cases check: the
// state's three and one it does not know.
var configNodes = []string{"n1", "n2", "n3", "ghost"}

// configCase is an edit of the state that may change NodeConfigs: the
// services and nodes then listed as changed, and the Changes Update must
// report.
type configCase struct {
	name     string
	edit     func(st *model.State)
	services []string
	nodes    []string
	want     Changes
}

// runConfigCases applies each case's edit to a new state and checks the
// update: its Changes, that they list every resource that changed, that
// the result is what a new Index gives, that every NodeConfig changed
// version exactly when want.AllConfigs, and then check.
func runConfigCases(t *testing.T, state func() *model.State, opts Options, cases []configCase,
	check func(t *testing.T, st *model.State, next *Index, got Changes)) {
	t.Helper()
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			st := state()
			ix := NewIndex(st, opts)
			before := snapshotNodes(ix, configNodes)
			tc.edit(st)
			next, got := checkUpdate(t, ix, st, tc.services, tc.nodes, tc.want)
			checkChanges(t, tc.name, before, next, got)
			checkSameIndex(t, tc.name, NewIndex(st, opts), next, configNodes)
			checkConfigVersions(t, ix, next, configNodes, tc.want.AllConfigs)
			check(t, st, next, got)
		})
	}
}

// checkConfigVersions checks that the NodeConfig of every node changed
// version from ix to next if and only if changed.
func checkConfigVersions(t *testing.T, ix, next *Index, nodes []string, changed bool) {
	t.Helper()
	for _, n := range nodes {
		was, now := ix.Node(n).Config(), next.Node(n).Config()
		if got := was.Version != now.Version; got != changed {
			t.Errorf("%s: config version changed = %v, want %v", n, got, changed)
		}
	}
}

func runUpdateCases(t *testing.T, tests []updateCase) {
	t.Helper()
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			st := smallState()
			ix := NewIndex(st, Options{})
			tc.edit(st)
			next, got := checkUpdate(t, ix, st, tc.services, tc.nodes, tc.want)
			if got.Empty() != (len(tc.want.Names)+len(tc.want.Removed)+len(tc.want.Zones)+len(tc.want.Nodes)+len(tc.want.ConfigNodes) == 0) {
				t.Errorf("Empty = %v for %+v", got.Empty(), got)
			}
			for _, name := range []string{"plain", "lb", "hinted", "itp"} {
				was, now := ix.Service(key(name)), next.Service(key(name))
				recomputed := false
				for _, r := range tc.recomputed {
					recomputed = recomputed || r == name
				}
				if !recomputed && was != now {
					t.Errorf("%s was recomputed, want its views reused", name)
				}
			}
			checkSameIndex(t, tc.name, NewIndex(st, Options{}), next, []string{"n1", "n2", "n3", "ghost"})
		})
	}
}

// TestUpdateFollowsNodesRead: a service recomputed to the same views but
// reading other nodes must be recomputed when one of those moves zone.
//
// Both endpoints are node-hinted to n1 and n3, zone-hinted to their own
// zone: n1 (zone z0) has a view of its own (every endpoint, where zone z0
// gets one), n3 (zone z2, hinted by nobody) reads the default. Re-hinting
// to n1 and n4 (also z2) changes no view, only the nodes read; then n4
// moves to z0 and needs a view of its own.
func TestUpdateFollowsNodesRead(t *testing.T) {
	slice := func(hinted string) *model.EndpointSlice {
		return newSlice("web", "web-a", httpPort,
			newEP("10.0.0.1", "n1", "z0", zones("z0"), forNodes("n1", hinted)),
			newEP("10.0.0.2", "n2", "z1", zones("z1"), forNodes("n1", hinted)))
	}
	st := model.NewState()
	st.Nodes = nodesOf("n1@z0", "n2@z1", "n3@z2", "n4@z2")
	st.Services[key("web")] = newSvc("web")
	st.Slices[key("web")] = slicesOf(slice("n3"))
	ix := NewIndex(st, Options{})

	st.Slices[key("web")] = slicesOf(slice("n4"))
	ix, ch := ix.Update(st, []model.ServiceKey{key("web")}, nil)
	if !ch.Empty() {
		t.Errorf("re-hinting changed %+v, want nothing", ch)
	}
	if got := ix.Service(key("web")).Nodes; !cmp.Equal(got, []string{"n1", "n4"}) {
		t.Fatalf("nodes read = %v, want [n1 n4]", got)
	}

	st.Nodes["n4"] = &model.Node{Name: "n4", Zone: "z0"}
	ix, ch = ix.Update(st, nil, []string{"n4"})
	checkSameIndex(t, "n4 moved", NewIndex(st, Options{}), ix, []string{"n1", "n2", "n3", "n4"})
	if got := ch.ForNode("n4", "z0"); !cmp.Equal(got, []string{"n4", "ns/web"}) {
		t.Errorf("ForNode(n4) = %v, want [n4 ns/web]", got)
	}
}

// TestUpdateConcurrentReaders: readers of the old Index and its NodeViews
// run while Updates derive new ones from it (run with -race).
func TestUpdateConcurrentReaders(t *testing.T) {
	w := newWorld(42)
	ix := NewIndex(w.st, Options{Workers: 2})
	nodes := w.universe()
	want := snapshotNodes(ix, nodes)
	var wg, started sync.WaitGroup
	done := make(chan struct{})
	for range 4 {
		started.Add(1)
		wg.Go(func() {
			for first := true; ; first = false {
				if first {
					started.Done()
				}
				select {
				case <-done:
					return
				default:
				}
				for _, n := range nodes {
					nv := ix.Node(n)
					if nv.Version() != want[n].version || SystemVersion(want[n].nv.Pairs()) != want[n].version {
						t.Errorf("node %s changed under a reader", n)
						return
					}
				}
			}
		})
	}
	started.Wait()
	next := ix
	for range 50 {
		svc, node := w.edit()
		var services []model.ServiceKey
		var nodes []string
		if svc != nil {
			services = append(services, *svc)
		}
		if node != "" {
			nodes = append(nodes, node)
		}
		next, _ = next.Update(w.st, services, nodes)
	}
	close(done)
	wg.Wait()
	checkSameIndex(t, "after 50 updates", NewIndex(w.st, Options{}), next, nodes)
}

func TestChangesForNode(t *testing.T) {
	ch := Changes{
		Names:       []string{"ns/b", "ns/d"},
		Removed:     []string{"ns/a"},
		Zones:       map[string][]string{"z1": {"ns/c", "ns/d"}},
		Nodes:       map[string][]string{"n1": {"ns/e"}, "n2": {"ns/f"}},
		ConfigNodes: []string{"n2"},
	}
	tests := []struct {
		name, node, zone string
		ch               Changes
		want             []string
	}{
		{name: "every part", node: "n1", zone: "z1", ch: ch, want: []string{"ns/a", "ns/b", "ns/c", "ns/d", "ns/e"}},
		{name: "config changed", node: "n2", zone: "z2", ch: ch, want: []string{"n2", "ns/a", "ns/b", "ns/d", "ns/f"}},
		{name: "node without zone ignores zone lists", node: "n3", zone: "", ch: ch, want: []string{"ns/a", "ns/b", "ns/d"}},
		{name: "nothing for this node", node: "n3", zone: "z1", ch: Changes{Nodes: map[string][]string{"n1": {"ns/e"}}}},
		{name: "every node's config", node: "n3", zone: "z1", ch: Changes{AllConfigs: true}, want: []string{"n3"}},
		{name: "no changes", node: "n1", zone: "z1"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := tc.ch.ForNode(tc.node, tc.zone)
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("ForNode (-want +got):\n%s", diff)
			}
			if len(got) > 0 {
				got[0] = "scribbled" // the caller's to keep
				if tc.ch.ForNode(tc.node, tc.zone)[0] == "scribbled" {
					t.Error("ForNode returned shared storage")
				}
			}
		})
	}
}

// TestUpdateNilState: a nil state is an empty one.
func TestUpdateNilState(t *testing.T) {
	ix := NewIndex(smallState(), Options{})
	next, ch := ix.Update(nil, []model.ServiceKey{key("plain"), key("lb")}, []string{"n1"})
	if next.Len() != 2 {
		t.Errorf("Len = %d, want 2 (the services not listed are kept)", next.Len())
	}
	if diff := cmp.Diff([]string{"ns/lb", "ns/plain"}, ch.Removed); diff != "" {
		t.Errorf("Removed (-want +got):\n%s", diff)
	}
	if nv := next.Node("n1"); nv.Zone() != "" || len(configOf(t, nv.Config()).GetNodeIps()) != 0 {
		t.Errorf("n1 still known: zone %q", nv.Zone())
	}
}
