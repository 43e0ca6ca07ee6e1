package nodeview

import (
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/protobuf/testing/protocmp"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/switchyard-proxy/switchyard/controlplane/internal/cache"
	"github.com/switchyard-proxy/switchyard/controlplane/internal/model"
	switchyardv1 "github.com/switchyard-proxy/switchyard/proto/switchyard/v1"
)

// smallState: a plain service, an ETP-Local one, a zone-hinted one, an
// ITP-Local one, over nodes n1@a, n2@b, n3@a.
func smallState() *model.State {
	st := model.NewState()
	st.Nodes = nodesOf("n1@a", "n2@b", "n3@a")
	add := func(svc *model.Service, eps ...model.Endpoint) {
		st.Services[svc.Key] = svc
		st.Slices[svc.Key] = slicesOf(newSlice(svc.Key.Name, svc.Key.Name+"-x", httpPort, eps...))
	}
	add(newSvc("plain"), newEP("10.0.1.1", "n1", "a"), newEP("10.0.1.2", "n2", "b"))
	add(newSvc("lb", withETPLocal(31000)), newEP("10.0.2.1", "n1", "a"), newEP("10.0.2.2", "n2", "b"))
	add(newSvc("hinted"), newEP("10.0.3.1", "n1", "a", zones("a")), newEP("10.0.3.2", "n2", "b", zones("b")))
	add(newSvc("itp", withITPLocal()), newEP("10.0.4.1", "n2", "b"))
	return st
}

func names(nv *NodeView) []string {
	var out []string
	for v := range nv.All() {
		out = append(out, v.Name)
	}
	return out
}

func TestNodeViewContents(t *testing.T) {
	ix := NewIndex(smallState(), Options{})
	tests := []struct {
		node          string
		wantNames     []string
		wantOverrides []string
	}{
		{node: "n1", wantNames: []string{"n1", "ns/hinted", "ns/itp", "ns/lb", "ns/plain"}, wantOverrides: []string{"ns/hinted", "ns/lb"}},
		{node: "n2", wantNames: []string{"n2", "ns/hinted", "ns/itp", "ns/lb", "ns/plain"}, wantOverrides: []string{"ns/hinted", "ns/itp", "ns/lb"}},
		{node: "n3", wantNames: []string{"n3", "ns/hinted", "ns/itp", "ns/lb", "ns/plain"}, wantOverrides: []string{"ns/hinted"}},
		{node: "unknown", wantNames: []string{"ns/hinted", "ns/itp", "ns/lb", "ns/plain", "unknown"}, wantOverrides: []string{}},
		{node: "zz", wantNames: []string{"ns/hinted", "ns/itp", "ns/lb", "ns/plain", "zz"}, wantOverrides: []string{}},
	}
	for _, tc := range tests {
		t.Run(tc.node, func(t *testing.T) {
			nv := ix.Node(tc.node)
			if diff := cmp.Diff(tc.wantNames, names(nv)); diff != "" {
				t.Errorf("Range order (-want +got):\n%s", diff)
			}
			if nv.Len() != len(tc.wantNames) {
				t.Errorf("Len = %d, want %d", nv.Len(), len(tc.wantNames))
			}
			if diff := cmp.Diff(tc.wantOverrides, nv.Overrides()); diff != "" {
				t.Errorf("Overrides (-want +got):\n%s", diff)
			}
			for _, name := range tc.wantNames {
				if v, ok := nv.Get(name); !ok || v == nil || v.Name != name {
					t.Errorf("Get(%q) = %v, %v", name, v, ok)
				}
			}
			if v, ok := nv.Get("ns/missing"); ok || v != nil {
				t.Errorf("Get(missing) = %v, %v, want nil, false", v, ok)
			}
			if got, want := nv.Version(), SystemVersion(nv.Pairs()); got != want {
				t.Errorf("Version = %s, SystemVersion of its pairs = %s", got, want)
			}
			if nv.Name() != tc.node || nv.Config().Name != tc.node {
				t.Errorf("Name = %q, config %q, want %q", nv.Name(), nv.Config().Name, tc.node)
			}
		})
	}
}

func TestNodeViewSharing(t *testing.T) {
	ix := NewIndex(smallState(), Options{})
	n1, n2, n3, unknown := ix.Node("n1"), ix.Node("n2"), ix.Node("n3"), ix.Node("unknown")
	tests := []struct {
		name string
		a, b *NodeView
		svc  string
		same bool
	}{
		{name: "plain service: one view everywhere", a: n1, b: n2, svc: "ns/plain", same: true},
		{name: "plain service: unknown node shares it", a: n1, b: unknown, svc: "ns/plain", same: true},
		{name: "ITP Local: nodes without endpoints share the default", a: n1, b: n3, svc: "ns/itp", same: true},
		{name: "ITP Local: hosting node differs", a: n1, b: n2, svc: "ns/itp", same: false},
		{name: "ETP Local: non-hosting node shares with unknown", a: n3, b: unknown, svc: "ns/lb", same: true},
		{name: "ETP Local: hosting nodes differ", a: n1, b: n2, svc: "ns/lb", same: false},
		{name: "hints: nodes of one zone share the zone view", a: n1, b: n3, svc: "ns/hinted", same: true},
		{name: "hints: nodes of different zones differ", a: n1, b: n2, svc: "ns/hinted", same: false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			va, vb := tc.a.get(tc.svc), tc.b.get(tc.svc)
			if (va == vb) != tc.same {
				t.Errorf("%s on %s and %s: same pointer = %v, want %v", tc.svc, tc.a.Name(), tc.b.Name(), va == vb, tc.same)
			}
			if (va.Version == vb.Version) != tc.same {
				t.Errorf("versions %s and %s: equal = %v, want %v", va.Version, vb.Version, va.Version == vb.Version, tc.same)
			}
		})
	}
	if n1.shared != n2.shared {
		t.Error("node views do not share the default set")
	}
	if ix.Service(model.ServiceKey{Namespace: "ns", Name: "plain"}).Default != n1.get("ns/plain") {
		t.Error("Index.Service default is not the view handed to nodes")
	}
}

func TestNodeConfig(t *testing.T) {
	st := smallState()
	st.Nodes["n1"].Addresses = addrs("192.168.0.1", "fd00::1")
	opts := Options{Defaults: Defaults{
		Mode:          switchyardv1.DataplaneMode_DATAPLANE_MODE_IPVS,
		MinSyncPeriod: time.Second,
		SyncPeriod:    30 * time.Second,
		IPVSScheduler: "wrr",
		ClusterCIDRs:  prefixes("10.0.0.0/8", "fd00:10::/48"),
		MasqueradeAll: true,
	}}
	full := func(name string) *switchyardv1.NodeConfig {
		return &switchyardv1.NodeConfig{
			NodeName: name,
			Mode:     switchyardv1.DataplaneMode_DATAPLANE_MODE_IPVS,
			Sync: &switchyardv1.SyncSettings{
				MinSyncPeriod: durationpb.New(time.Second),
				SyncPeriod:    durationpb.New(30 * time.Second),
			},
			IpvsScheduler: "wrr",
			ClusterCidrs:  []string{"10.0.0.0/8", "fd00:10::/48"},
			MasqueradeAll: true,
		}
	}
	n1 := full("n1")
	n1.Zone = "a"
	n1.NodeIps = []string{"192.168.0.1", "fd00::1"}
	tests := []struct {
		name string
		opts Options
		node string
		want *switchyardv1.NodeConfig
	}{
		{name: "known node with defaults", opts: opts, node: "n1", want: n1},
		{name: "unknown node: name and defaults only", opts: opts, node: "new", want: full("new")},
		{name: "no defaults", node: "n2", want: &switchyardv1.NodeConfig{NodeName: "n2", Zone: "b"}},
		{
			name: "only a sync period",
			opts: Options{Defaults: Defaults{SyncPeriod: time.Minute}},
			node: "new",
			want: &switchyardv1.NodeConfig{NodeName: "new", Sync: &switchyardv1.SyncSettings{SyncPeriod: durationpb.New(time.Minute)}},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := NewIndex(st, tc.opts).Node(tc.node).Config()
			// The settings hash has its own test (TestSettingsHash).
			if diff := cmp.Diff(tc.want, configOf(t, got), protocmp.Transform(),
				protocmp.IgnoreFields(&switchyardv1.NodeConfig{}, "settings_hash")); diff != "" {
				t.Errorf("NodeConfig (-want +got):\n%s", diff)
			}
			if serviceOf(t, got) != nil {
				t.Error("config view also has a service body")
			}
		})
	}
}

func TestRangeStopsEarly(t *testing.T) {
	nv := NewIndex(smallState(), Options{}).Node("n1")
	for stopAt := 1; stopAt <= nv.Len(); stopAt++ {
		t.Run(strings.Repeat("x", stopAt), func(t *testing.T) {
			n := 0
			nv.Range(func(*cache.View) bool { n++; return n < stopAt })
			if n != stopAt {
				t.Errorf("Range visited %d, want %d", n, stopAt)
			}
		})
	}
}

func TestComputeMatchesIndex(t *testing.T) {
	st := smallState()
	ix := NewIndex(st, Options{Workers: 3})
	for _, node := range []string{"n1", "n2", "n3", "ghost"} {
		t.Run(node, func(t *testing.T) {
			a, b := Compute(st, node), ix.Node(node)
			if a.Version() != b.Version() {
				t.Errorf("Compute version %s, Index version %s", a.Version(), b.Version())
			}
			if diff := cmp.Diff(collectPairs(a), collectPairs(b)); diff != "" {
				t.Errorf("pairs (-compute +index):\n%s", diff)
			}
		})
	}
	if nv := Compute(nil, "n1"); nv.Len() != 1 || nv.Config().Name != "n1" {
		t.Errorf("Compute(nil state) = %d resources", nv.Len())
	}
}

func collectPairs(nv *NodeView) map[string]string {
	m := map[string]string{}
	for name, version := range nv.Pairs() {
		m[name] = version
	}
	return m
}

func addrs(s ...string) []netip.Addr { return parseAll(netip.MustParseAddr, s) }

func prefixes(s ...string) []netip.Prefix { return parseAll(netip.MustParsePrefix, s) }

// parseAll parses each of ss with parse, which panics on a bad one.
func parseAll[T any](parse func(string) T, ss []string) []T {
	out := make([]T, len(ss))
	for i, s := range ss {
		out[i] = parse(s)
	}
	return out
}

func TestRangeNameOrder(t *testing.T) {
	st := model.NewState()
	for _, key := range []model.ServiceKey{{Namespace: "a", Name: "x"}, {Namespace: "a-b", Name: "x"}, {Namespace: "a", Name: "a"}, {Namespace: "b", Name: "0"}} {
		st.Services[key] = &model.Service{Key: key, Type: model.TypeClusterIP, ClusterIPs: addrs("10.96.0.1")}
	}
	tests := []struct {
		node string
		want []string
	}{
		{node: "a", want: []string{"a", "a-b/x", "a/a", "a/x", "b/0"}},
		{node: "a-c", want: []string{"a-b/x", "a-c", "a/a", "a/x", "b/0"}},
		{node: "b", want: []string{"a-b/x", "a/a", "a/x", "b", "b/0"}},
		{node: "c", want: []string{"a-b/x", "a/a", "a/x", "b/0", "c"}},
	}
	ix := NewIndex(st, Options{})
	for _, tc := range tests {
		t.Run(tc.node, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, names(ix.Node(tc.node))); diff != "" {
				t.Errorf("Range order (-want +got):\n%s", diff)
			}
		})
	}
}

// TestSharingProperty, over random services of every policy: a service
// without Local policy or hints has one View on every node; one with a
// Local policy and no hints differs from it only on nodes hosting a usable
// endpoint.
func TestSharingProperty(t *testing.T) {
	for seed := range uint64(20) {
		w := newWorld(seed)
		ix := NewIndex(w.st, Options{})
		for _, k := range w.keys {
			svc := w.st.Services[k]
			if svc == nil {
				continue
			}
			hinted, hosts := false, map[string]bool{}
			for _, s := range w.st.Slices[k] {
				for _, ep := range s.Endpoints {
					hinted = hinted || len(ep.HintZones) > 0 || len(ep.HintNodes) > 0
					if usable(&ep) {
						hosts[ep.NodeName] = true
					}
				}
			}
			if hinted {
				continue
			}
			_, usesLocal := policies(svc)
			def := ix.Service(k).Default
			for _, n := range w.universe() {
				v := ix.Node(n).get(def.Name)
				if v != def && (!usesLocal || !hosts[n]) {
					t.Errorf("seed %d: %s on %s has a view of its own (local policy %v, hosts %v)", seed, def.Name, n, usesLocal, hosts)
				}
			}
		}
	}
}
