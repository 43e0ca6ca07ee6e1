package nodeview

import (
	"crypto/sha256"
	"encoding/hex"
	"math/rand/v2"
	"regexp"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/testing/protocmp"

	"github.com/switchyard-proxy/switchyard/controlplane/internal/model"
	switchyardv1 "github.com/switchyard-proxy/switchyard/proto/switchyard/v1"
)

var versionRE = regexp.MustCompile(`^[0-9a-f]{16}$`)

func TestViewEncoding(t *testing.T) {
	ix := NewIndex(smallState(), Options{Defaults: Defaults{Mode: switchyardv1.DataplaneMode_DATAPLANE_MODE_NFTABLES}})
	nv := ix.Node("n2")
	for v := range nv.All() {
		t.Run(v.Name, func(t *testing.T) {
			// Views keep no message: what they encode is what they are.
			got := &switchyardv1.Resource{}
			if err := proto.Unmarshal(v.Bytes, got); err != nil {
				t.Fatalf("Unmarshal: %v", err)
			}
			if got.GetName() != v.Name || got.GetVersion() != v.Version || got.GetBody() == nil {
				t.Errorf("Bytes encode %q@%q with body %v, want %q@%q with a body", got.GetName(), got.GetVersion(), got.GetBody() != nil, v.Name, v.Version)
			}
			want, err := proto.MarshalOptions{Deterministic: true}.Marshal(got)
			if err != nil {
				t.Fatalf("Marshal: %v", err)
			}
			if diff := cmp.Diff(want, v.Bytes); diff != "" {
				t.Errorf("Bytes differ from a deterministic marshal of Resource (-want +got):\n%s", diff)
			}
			if !versionRE.MatchString(v.Version) {
				t.Errorf("Version %q is not 16 hex digits", v.Version)
			}
		})
	}
	if !versionRE.MatchString(nv.Version()) {
		t.Errorf("system version %q is not 16 hex digits", nv.Version())
	}
}

// TestNewViewIsAMarshal: the one encoder gives exactly a deterministic
// marshal of the Resource it was given, which parses back to it, with the
// body's content hash as its version.
func TestNewViewIsAMarshal(t *testing.T) {
	sv := &switchyardv1.ServiceView{
		Namespace: "ns", Name: "web", ClusterIps: []string{"10.96.0.10", "fd00::10"},
		Ports: []*switchyardv1.ServicePort{{Name: "http", Protocol: switchyardv1.Protocol_PROTOCOL_TCP, Port: 80}},
		ClusterEndpoints: []*switchyardv1.Endpoint{{Address: "10.0.0.1", Ports: []*switchyardv1.EndpointPort{{Name: "http", Port: 8080}},
			Ready: true, Serving: true, NodeName: "n1", Zone: "a"}},
	}
	nc := &switchyardv1.NodeConfig{NodeName: "n1", Zone: "a", Mode: switchyardv1.DataplaneMode_DATAPLANE_MODE_IPVS}
	tests := []struct {
		name string
		view *View
		want *switchyardv1.Resource
	}{
		{name: "service", view: newServiceResource("ns/web", sv),
			want: &switchyardv1.Resource{Name: "ns/web", Body: &switchyardv1.Resource_Service{Service: sv}}},
		{name: "empty service", view: newServiceResource("ns/empty", &switchyardv1.ServiceView{}),
			want: &switchyardv1.Resource{Name: "ns/empty", Body: &switchyardv1.Resource_Service{Service: &switchyardv1.ServiceView{}}}},
		{name: "node config", view: newConfigResource("n1", nc),
			want: &switchyardv1.Resource{Name: "n1", Body: &switchyardv1.Resource_NodeConfig{NodeConfig: nc}}},
		{name: "no name", view: newConfigResource("", nc),
			want: &switchyardv1.Resource{Body: &switchyardv1.Resource_NodeConfig{NodeConfig: nc}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			body, err := proto.MarshalOptions{Deterministic: true}.Marshal(&switchyardv1.Resource{Body: tt.want.GetBody()})
			if err != nil {
				t.Fatalf("Marshal: %v", err)
			}
			// The body field is a tag, a length, then the message.
			_, _, n := protowire.ConsumeTag(body)
			_, m := protowire.ConsumeVarint(body[n:])
			sum := sha256.Sum256(body[n+m:])
			tt.want.Version = hex.EncodeToString(sum[:versionBytes])
			if tt.view.Version != tt.want.GetVersion() || tt.view.Name != tt.want.GetName() {
				t.Errorf("view %q@%q, want %q@%q", tt.view.Name, tt.view.Version, tt.want.GetName(), tt.want.GetVersion())
			}
			want, err := proto.MarshalOptions{Deterministic: true}.Marshal(tt.want)
			if err != nil {
				t.Fatalf("Marshal: %v", err)
			}
			if diff := cmp.Diff(want, tt.view.Bytes); diff != "" {
				t.Errorf("Bytes differ from a deterministic marshal of Resource (-want +got):\n%s", diff)
			}
			got := &switchyardv1.Resource{}
			if err := proto.Unmarshal(tt.view.Bytes, got); err != nil {
				t.Fatalf("Unmarshal: %v", err)
			}
			if diff := cmp.Diff(tt.want, got, protocmp.Transform()); diff != "" {
				t.Errorf("round trip (-want +got):\n%s", diff)
			}
		})
	}
}

// TestVersionPinned pins the hashing scheme: these values must be the same
// in every build and every replica. Change them only on purpose.
func TestVersionPinned(t *testing.T) {
	st := webState("n1@a")
	nv := Compute(st, "n1")
	got := map[string]string{"system": nv.Version()}
	for name, version := range nv.Pairs() {
		got[name] = version
	}
	want := map[string]string{
		"system": "d9a28df026d33aa9",
		"n1":     "633f921c3b9d38b8",
		"ns/web": "4a3482e2f57598ad",
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("versions (-want +got):\n%s", diff)
	}
}

// shuffled rebuilds st with every map rebuilt in a random insertion order
// and the endpoints of every slice permuted.
func shuffled(st *model.State, r *rand.Rand) *model.State {
	out := model.NewState()
	keys := make([]model.ServiceKey, 0, len(st.Services))
	for k := range st.Services {
		keys = append(keys, k)
	}
	r.Shuffle(len(keys), func(i, j int) { keys[i], keys[j] = keys[j], keys[i] })
	for _, k := range keys {
		out.Services[k] = st.Services[k]
		bySlice := map[model.SliceKey]*model.EndpointSlice{}
		for sk, s := range st.Slices[k] {
			c := *s
			c.Endpoints = append([]model.Endpoint(nil), s.Endpoints...)
			r.Shuffle(len(c.Endpoints), func(i, j int) { c.Endpoints[i], c.Endpoints[j] = c.Endpoints[j], c.Endpoints[i] })
			bySlice[sk] = &c
		}
		out.Slices[k] = bySlice
	}
	for name, n := range st.Nodes {
		out.Nodes[name] = n
	}
	return out
}

func systemVersions(ix *Index, nodes []string) map[string]string {
	m := map[string]string{}
	for _, n := range nodes {
		m[n] = ix.Node(n).Version()
	}
	return m
}

func TestVersionDeterminism(t *testing.T) {
	g := genSpec{services: 300, endpoints: 6, nodes: 40, zones: 4, localEvery: 5, hintedEvery: 7, itpLocalEach: 11}
	base := genState(g)
	nodes := []string{"ghost"}
	for i := range g.nodes {
		nodes = append(nodes, genNodeName(i))
	}
	want := systemVersions(NewIndex(base, Options{Workers: 1}), nodes)
	tests := []struct {
		name string
		st   *model.State
		opts Options
	}{
		{name: "rebuild", st: base, opts: Options{Workers: 1}},
		{name: "regenerate", st: genState(g), opts: Options{}},
		{name: "many workers", st: base, opts: Options{Workers: 16}},
		{name: "shuffled seed 1", st: shuffled(base, rand.New(rand.NewPCG(1, 1))), opts: Options{}},
		{name: "shuffled seed 2", st: shuffled(base, rand.New(rand.NewPCG(2, 7))), opts: Options{Workers: 3}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := systemVersions(NewIndex(tc.st, tc.opts), nodes)
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("system versions (-want +got):\n%s", diff)
			}
		})
	}
}

func TestVersionChanges(t *testing.T) {
	type mutation func(st *model.State)
	firstEP := func(st *model.State, svc string) *model.Endpoint {
		k := model.ServiceKey{Namespace: "ns", Name: svc}
		for _, s := range st.Slices[k] {
			c := *s
			c.Endpoints = append([]model.Endpoint(nil), s.Endpoints...)
			st.Slices[k][s.Key] = &c
			return &c.Endpoints[0]
		}
		return nil
	}
	editSlice := func(st *model.State, svc string, f func(*model.EndpointSlice)) {
		k := model.ServiceKey{Namespace: "ns", Name: svc}
		for sk, s := range st.Slices[k] {
			c := *s
			f(&c)
			st.Slices[k][sk] = &c
		}
	}
	tests := []struct {
		name     string
		mutate   mutation
		svc      string // service whose default version must change; "" for none
		node     string // node whose system version is checked
		wantSame bool
	}{
		{name: "endpoint turns not ready", svc: "ns/plain", node: "n3", mutate: func(st *model.State) { notReady(firstEP(st, "plain")) }},
		{name: "target port changes", svc: "ns/plain", node: "n3", mutate: func(st *model.State) {
			editSlice(st, "plain", func(s *model.EndpointSlice) { s.Ports = []model.EndpointPort{slicePort("http", 9999)} })
		}},
		{name: "trigger time alone changes nothing", node: "n3", wantSame: true, mutate: func(st *model.State) {
			editSlice(st, "plain", func(s *model.EndpointSlice) { s.TriggerTime = time.Unix(1700000000, 0) })
		}},
		{name: "service gains a port", svc: "ns/plain", node: "n1", mutate: func(st *model.State) {
			k := model.ServiceKey{Namespace: "ns", Name: "plain"}
			st.Services[k] = newSvc("plain", withPorts(tcp("http", 80), tcp("admin", 81)))
		}},
		{name: "node zone changes its config and view", node: "n3", mutate: func(st *model.State) {
			st.Nodes["n3"] = &model.Node{Name: "n3", Zone: "b"}
		}},
		{name: "ITP Local endpoint change on another node leaves this node unchanged", node: "n3", wantSame: true, mutate: func(st *model.State) {
			servingTerminating(firstEP(st, "itp"))
		}},
		{name: "ITP Local endpoint change on the hosting node changes it", node: "n2", mutate: func(st *model.State) {
			servingTerminating(firstEP(st, "itp"))
		}},
		{name: "ITP Local: last usable endpoint gone changes has_any_endpoints everywhere", svc: "ns/itp", node: "n3", mutate: func(st *model.State) {
			notReady(firstEP(st, "itp"))
		}},
		{name: "nothing changes", node: "n1", wantSame: true, mutate: func(*model.State) {}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			before := NewIndex(smallState(), Options{})
			st := smallState()
			tc.mutate(st)
			after := NewIndex(st, Options{})
			if tc.svc != "" {
				b, a := before.shared.byName(tc.svc), after.shared.byName(tc.svc)
				if a.Version == b.Version {
					t.Errorf("%s version unchanged: %s", tc.svc, a.Version)
				}
			}
			b, a := before.Node(tc.node).Version(), after.Node(tc.node).Version()
			if (a == b) != tc.wantSame {
				t.Errorf("system version of %s: before %s after %s, want same = %v", tc.node, b, a, tc.wantSame)
			}
		})
	}
}

func TestSystemVersion(t *testing.T) {
	pairs := func(kv ...string) func(func(string, string) bool) {
		return func(yield func(string, string) bool) {
			for i := 0; i+1 < len(kv); i += 2 {
				if !yield(kv[i], kv[i+1]) {
					return
				}
			}
		}
	}
	ref := SystemVersion(pairs("a", "1", "b", "2"))
	tests := []struct {
		name     string
		kv       []string
		wantSame bool
	}{
		{name: "same pairs in another order", kv: []string{"b", "2", "a", "1"}, wantSame: true},
		{name: "one version differs", kv: []string{"a", "1", "b", "3"}},
		{name: "names and versions swapped", kv: []string{"1", "a", "2", "b"}},
		{name: "pair boundaries moved", kv: []string{"a1", "", "b", "2"}},
		{name: "one pair missing", kv: []string{"a", "1"}},
		{name: "one pair added", kv: []string{"a", "1", "b", "2", "c", "3"}},
		{name: "empty set", kv: nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := SystemVersion(pairs(tc.kv...))
			if (got == ref) != tc.wantSame {
				t.Errorf("SystemVersion = %s, reference %s, want same = %v", got, ref, tc.wantSame)
			}
		})
	}
}
