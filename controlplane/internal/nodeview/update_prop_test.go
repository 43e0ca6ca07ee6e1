package nodeview

import (
	"fmt"
	"maps"
	"math/rand/v2"
	"net/netip"
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/switchyard-proxy/switchyard/controlplane/internal/model"
)

// world is a small random cluster that edits itself, for property tests:
// few names, so that edits collide (duplicate addresses, endpoints on
// nodes that come and go, zones that change under hinted services).
type world struct {
	r     *rand.Rand
	st    *model.State
	nodes []string // candidate node names; some never exist
	zones []string
	keys  []model.ServiceKey
}

func newWorld(seed uint64) *world {
	w := &world{
		r:     rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15)),
		st:    model.NewState(),
		zones: []string{"z0", "z1", "z2"},
	}
	for i := range 8 {
		w.nodes = append(w.nodes, fmt.Sprintf("n%d", i))
	}
	for _, ns := range []string{"a", "a-b"} {
		for i := range 5 {
			w.keys = append(w.keys, model.ServiceKey{Namespace: ns, Name: fmt.Sprintf("s%d", i)})
		}
	}
	for _, n := range w.nodes[:6] {
		w.st.Nodes[n] = w.node(n)
	}
	for _, k := range w.keys {
		if w.r.IntN(4) > 0 {
			w.st.Services[k] = w.service(k)
			for j := range w.r.IntN(3) {
				w.setSlice(k, j)
			}
		}
	}
	return w
}

func (w *world) pick(s []string) string { return s[w.r.IntN(len(s))] }

func (w *world) node(name string) *model.Node {
	n := &model.Node{Name: name, Addresses: []netip.Addr{netip.AddrFrom4([4]byte{192, 168, 0, byte(w.r.IntN(4))})}}
	if w.r.IntN(5) > 0 {
		n.Zone = w.pick(w.zones)
	}
	return n
}

// service builds a random service the way translate would allow it.
func (w *world) service(k model.ServiceKey) *model.Service {
	svc := &model.Service{
		Key:            k,
		Type:           model.ServiceType(1 + w.r.IntN(3)),
		ClusterIPs:     []netip.Addr{netip.MustParseAddr("10.96.0.1")},
		Ports:          []model.ServicePort{{Name: "http", Protocol: model.ProtocolTCP, Port: 80}},
		ExternalPolicy: model.PolicyCluster,
		InternalPolicy: model.PolicyCluster,
	}
	if w.r.IntN(3) == 0 {
		svc.Ports = append(svc.Ports, model.ServicePort{Name: "dns", Protocol: model.ProtocolUDP, Port: 53})
	}
	if w.r.IntN(4) == 0 {
		svc.ClusterIPs = append(svc.ClusterIPs, netip.MustParseAddr("fd00::1"))
	}
	if svc.Type != model.TypeClusterIP && w.r.IntN(5) > 0 {
		for i := range svc.Ports {
			svc.Ports[i].NodePort = 30000 + uint16(i)
		}
	}
	if svc.Type == model.TypeLoadBalancer && w.r.IntN(2) == 0 {
		svc.LoadBalancerIPs = []netip.Addr{netip.MustParseAddr("203.0.113.1")}
	}
	if w.r.IntN(5) == 0 {
		svc.ExternalIPs = []netip.Addr{netip.MustParseAddr("192.0.2.1")}
	}
	if w.r.IntN(3) == 0 {
		svc.InternalPolicy = model.PolicyLocal
	}
	if (svc.Type != model.TypeClusterIP || len(svc.ExternalIPs) > 0) && w.r.IntN(2) == 0 {
		svc.ExternalPolicy = model.PolicyLocal
	}
	return svc
}

// setSlice replaces (or adds) slice j of k with a random one.
func (w *world) setSlice(k model.ServiceKey, j int) {
	s := &model.EndpointSlice{
		Key:     model.SliceKey{Namespace: k.Namespace, Name: fmt.Sprintf("%s-%d", k.Name, j)},
		Service: k,
		Family:  model.IPv4,
		Ports:   []model.EndpointPort{{Name: "http", Protocol: model.ProtocolTCP, Port: 8080}},
	}
	if w.r.IntN(3) == 0 {
		s.Ports = append(s.Ports, model.EndpointPort{Name: "dns", Protocol: model.ProtocolUDP, Port: 5353})
	}
	names := append(slices.Clone(w.nodes), "n8", "")
	for range w.r.IntN(5) {
		ep := model.Endpoint{
			Address:  netip.AddrFrom4([4]byte{10, 0, 0, byte(1 + w.r.IntN(6))}),
			NodeName: w.pick(names),
			Zone:     w.pick(w.zones),
		}
		switch w.r.IntN(4) {
		case 0, 1:
			ep.Ready, ep.Serving = true, true
		case 2:
			ep.Serving, ep.Terminating = true, true
		case 3:
			ep.Terminating = w.r.IntN(2) == 0
		}
		s.Endpoints = append(s.Endpoints, ep)
	}
	w.hint(s)
	if w.st.Slices[k] == nil {
		w.st.Slices[k] = map[model.SliceKey]*model.EndpointSlice{}
	}
	w.st.Slices[k][s.Key] = s
}

// hint sets random hints on the endpoints of s (which must be new: model
// values are immutable once in the state).
func (w *world) hint(s *model.EndpointSlice) {
	mode := w.r.IntN(4) // 0: none, 1: zones, 2: zones and nodes, 3: some endpoints only
	names := append(slices.Clone(w.nodes), "n8")
	for i := range s.Endpoints {
		ep := &s.Endpoints[i]
		ep.HintZones, ep.HintNodes = nil, nil
		if mode == 1 || mode == 2 || (mode == 3 && i%2 == 0) {
			ep.HintZones = []string{w.pick(w.zones)}
		}
		if mode == 2 {
			ep.HintNodes = []string{w.pick(names), w.pick(names)}
		}
	}
}

// rehint replaces a slice of k by a copy with new hints only: the default
// view usually stays, the zone and node views move.
func (w *world) rehint(k model.ServiceKey) {
	for sk, old := range w.st.Slices[k] {
		s := *old
		s.Endpoints = slices.Clone(old.Endpoints)
		w.hint(&s)
		w.st.Slices[k][sk] = &s
		return
	}
}

// edit applies one random edit in place and reports what it touched.
func (w *world) edit() (svc *model.ServiceKey, node string) {
	k := w.keys[w.r.IntN(len(w.keys))]
	switch w.r.IntN(12) {
	case 10, 11:
		w.rehint(k)
	case 0, 1:
		w.st.Services[k] = w.service(k)
	case 2:
		delete(w.st.Services, k)
		if w.r.IntN(2) == 0 {
			delete(w.st.Slices, k)
		}
	case 3, 4, 5:
		w.setSlice(k, w.r.IntN(3))
	case 6:
		for sk := range w.st.Slices[k] {
			delete(w.st.Slices[k], sk)
			break
		}
	case 7, 8:
		node = w.pick(append(slices.Clone(w.nodes), "n8"))
		w.st.Nodes[node] = w.node(node)
		return nil, node
	case 9:
		node = w.pick(w.nodes)
		delete(w.st.Nodes, node)
		return nil, node
	}
	return &k, ""
}

// universe is every node name a test looks at: all candidates, a name
// only endpoints use, and one nothing names.
func (w *world) universe() []string { return append(slices.Clone(w.nodes), "n8", "ghost") }

// TestUpdateMatchesNewIndex: for random sequences of edits, the Index
// obtained by successive Updates gives every node exactly the views and
// versions NewIndex gives on the final state; Changes names every
// resource that changed on each node; the previous Index and its
// NodeViews are left as they were.
func TestUpdateMatchesNewIndex(t *testing.T) {
	const seeds, steps = 50, 40
	var listed, changed, allConfigs int
	for seed := range uint64(seeds) {
		w := newWorld(seed)
		opts := Options{Defaults: goldenDefaults, Workers: 1 + int(seed%3)}
		if seed%2 == 1 {
			// Advertise a service's endpoints: its single-TCP-port slices
			// come and go, so every NodeConfig changes now and then.
			opts.AdvertiseService = w.keys[int(seed/2)%len(w.keys)]
		}
		ix := NewIndex(w.st, opts)
		for step := range steps {
			var services []model.ServiceKey
			var nodes []string
			for range 1 + w.r.IntN(3) {
				svc, node := w.edit()
				if svc != nil {
					services = append(services, *svc)
				}
				if node != "" {
					nodes = append(nodes, node)
				}
			}
			if w.r.IntN(5) == 0 { // listing an unchanged key is harmless
				services = append(services, w.keys[w.r.IntN(len(w.keys))])
			}
			before := snapshotNodes(ix, w.universe())
			next, ch := ix.Update(w.st, services, nodes)
			where := fmt.Sprintf("seed %d step %d", seed, step)
			checkUnchanged(t, where, ix, before)
			checkSameIndex(t, where, NewIndex(w.st, opts), next, w.universe())
			l, c := checkChanges(t, where, before, next, ch)
			listed, changed = listed+l, changed+c
			if ch.AllConfigs {
				allConfigs++
			}
			ix = next
		}
	}
	t.Logf("changes listed %d (node, name) pairs, %d of them changed: %.0f%% false positives",
		listed, changed, 100*float64(listed-changed)/float64(max(listed, 1)))
	if listed > 2*changed {
		t.Errorf("too many false positives: %d listed for %d changed", listed, changed)
	}
	if allConfigs == 0 {
		t.Error("no update changed the advertised control-plane addresses: the property is not exercised")
	}
}

// nodeSnapshot is a NodeView and what it held when taken.
type nodeSnapshot struct {
	nv      *NodeView
	version string
	pairs   map[string]string
}

func snapshotNodes(ix *Index, nodes []string) map[string]nodeSnapshot {
	out := map[string]nodeSnapshot{}
	for _, n := range nodes {
		nv := ix.Node(n)
		out[n] = nodeSnapshot{nv: nv, version: nv.Version(), pairs: collectPairs(nv)}
	}
	return out
}

// checkUnchanged: the old Index and the NodeViews it gave out still hold
// exactly what they held.
func checkUnchanged(t *testing.T, where string, old *Index, before map[string]nodeSnapshot) {
	t.Helper()
	for n, s := range before {
		if diff := cmp.Diff(s.pairs, collectPairs(s.nv)); diff != "" || s.nv.Version() != s.version {
			t.Fatalf("%s: NodeView of %s changed by Update (-before +after):\n%s", where, n, diff)
		}
		if again := old.Node(n); again.Version() != s.version {
			t.Fatalf("%s: old Index gives %s version %s, was %s", where, n, again.Version(), s.version)
		}
	}
}

// checkSameIndex: got gives every node what want gives it.
func checkSameIndex(t *testing.T, where string, want, got *Index, nodes []string) {
	t.Helper()
	if want.Len() != got.Len() {
		t.Fatalf("%s: Len = %d, NewIndex %d", where, got.Len(), want.Len())
	}
	for _, n := range nodes {
		a, b := want.Node(n), got.Node(n)
		if diff := cmp.Diff(collectPairs(a), collectPairs(b)); diff != "" {
			t.Fatalf("%s: node %s pairs (-NewIndex +Update):\n%s", where, n, diff)
		}
		if a.Version() != b.Version() || b.Version() != SystemVersion(b.Pairs()) {
			t.Fatalf("%s: node %s version: NewIndex %s, Update %s, from pairs %s", where, n, a.Version(), b.Version(), SystemVersion(b.Pairs()))
		}
		if diff := cmp.Diff(a.Overrides(), b.Overrides()); diff != "" {
			t.Fatalf("%s: node %s overrides (-NewIndex +Update):\n%s", where, n, diff)
		}
		if a.Zone() != b.Zone() {
			t.Fatalf("%s: node %s zone: NewIndex %q, Update %q", where, n, a.Zone(), b.Zone())
		}
		for name := range collectPairs(a) {
			if b.get(name) == nil || b.get(name).Version != a.get(name).Version {
				t.Fatalf("%s: node %s Get(%s) differs", where, n, name)
			}
		}
	}
}

// checkChanges: every resource that changed on a node is in ForNode; it
// returns how many (node, name) pairs were listed and how many changed.
func checkChanges(t *testing.T, where string, before map[string]nodeSnapshot, next *Index, ch Changes) (listed, changed int) {
	t.Helper()
	for n, s := range before {
		nv := next.Node(n)
		after := collectPairs(nv)
		got := ch.ForNode(n, nv.Zone())
		var want []string
		for _, name := range slices.Sorted(maps.Keys(unionPairs(s.pairs, after))) {
			if v, ok := after[name]; !ok || v != s.pairs[name] {
				want = append(want, name)
			}
		}
		for _, name := range want {
			if _, ok := slices.BinarySearch(got, name); !ok {
				t.Fatalf("%s: node %s: %s changed but ForNode = %v\nchanges: %+v", where, n, name, got, ch)
			}
		}
		if len(got) == 0 {
			if nv.Version() != s.version {
				t.Fatalf("%s: node %s: version changed and ForNode is empty", where, n)
			}
			// A caller keeps the old NodeView of such a node: it must hold
			// nothing the new one does not, or old generations pile up.
			if nv.shared != s.nv.shared || nv.layer != s.nv.layer || !slices.Equal(nv.own, s.nv.own) || nv.config != s.nv.config && nv.config.Version != s.nv.config.Version {
				t.Fatalf("%s: node %s: nothing changed but its NodeView shares less with the old one", where, n)
			}
		}
		listed, changed = listed+len(got), changed+len(want)
	}
	return listed, changed
}

func unionPairs(a, b map[string]string) map[string]string {
	out := maps.Clone(a)
	maps.Copy(out, b)
	return out
}
