package fragments

import (
	"maps"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"google.golang.org/protobuf/proto"

	switchyardv1 "github.com/switchyard-proxy/switchyard/proto/switchyard/v1"
)

func view(ip string) *switchyardv1.ServiceView {
	return &switchyardv1.ServiceView{ClusterIps: []string{ip}}
}

func hint(names ...string) map[string]struct{} {
	out := map[string]struct{}{}
	for _, n := range names {
		out[n] = struct{}{}
	}
	return out
}

func TestChanged(t *testing.T) {
	held := map[string]*switchyardv1.ServiceView{"a": view("10.0.0.1"), "b": view("10.0.0.2"), "c": view("10.0.0.3")}
	updated := maps.Clone(held)
	updated["b"] = view("10.0.0.22")
	added := maps.Clone(held)
	added["d"] = view("10.0.0.4")
	removed := maps.Clone(held)
	delete(removed, "c")
	resent := map[string]*switchyardv1.ServiceView{}
	for n, sv := range held {
		resent[n] = proto.Clone(sv).(*switchyardv1.ServiceView)
	}
	for _, tc := range []struct {
		name        string
		services    map[string]*switchyardv1.ServiceView
		hint        map[string]struct{}
		want        []string
		wantIgnored int
	}{
		{name: "no hint, nothing changed", services: held},
		{name: "no hint: every service compared", services: updated, want: []string{"b"}},
		{name: "hint of the update", services: updated, hint: hint("b"), want: []string{"b"}},
		{name: "hint trusted for what it leaves out", services: updated, hint: hint("a")},
		{name: "hint of an addition", services: added, hint: hint("d"), want: []string{"d"}},
		{name: "hint of a removal", services: removed, hint: hint("c"), want: []string{"c"}},
		{name: "names neither here nor held", services: held, hint: hint("zz", "nodeconfig")},
		{name: "equal messages resent", services: resent, hint: hint("a", "b", "c")},
		{name: "addition left out: ignored", services: added, hint: hint(), want: []string{"d"}, wantIgnored: 1},
		{name: "removal left out: ignored", services: removed, hint: hint("a"), want: []string{"c"}, wantIgnored: 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := &Memo[string]{}
			m.Reset("k")
			for n, sv := range held {
				m.Put(n, sv, "frag of "+n)
			}
			got := m.Changed(tc.services, tc.hint)
			if diff := cmp.Diff(tc.want, got, cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("Changed (-want +got):\n%s", diff)
			}
			if m.HintIgnored != tc.wantIgnored {
				t.Errorf("HintIgnored = %d, want %d", m.HintIgnored, tc.wantIgnored)
			}
		})
	}
}

func TestLookupReusesUnchangedUnderOneKey(t *testing.T) {
	m := &Memo[int]{}
	m.Reset("node-1")
	sv := view("10.0.0.1")
	m.Put("a", sv, 1)
	if f, ok := m.Lookup("a", proto.Clone(sv).(*switchyardv1.ServiceView)); !ok || f != 1 || m.Reused != 1 {
		t.Errorf("Lookup of an equal view = %d, %v (reused %d), want 1, true (1)", f, ok, m.Reused)
	}
	if _, ok := m.Lookup("a", view("10.0.0.9")); ok {
		t.Error("Lookup of a changed view hit")
	}
	m.Reset("node-2")
	if m.Holds("node-1") || m.Len() != 0 {
		t.Errorf("after Reset under another key: holds node-1 %v, %d fragments", m.Holds("node-1"), m.Len())
	}
}

func TestFragmentsRendersOnlyWhatChanged(t *testing.T) {
	m := &Memo[string]{}
	m.Reset("k")
	m.Put("a", view("10.0.0.1"), "held a")
	m.Put("b", view("10.0.0.2"), "held b")
	services := map[string]*switchyardv1.ServiceView{"c": view("10.0.0.3"), "b": view("10.0.0.22"), "a": view("10.0.0.1")}
	type got struct {
		Frag  string
		Fresh bool
	}
	var out []got
	for f, fresh := range m.Fragments(services, func(name string, _ *switchyardv1.ServiceView) string { return "new " + name }) {
		out = append(out, got{f, fresh})
	}
	want := []got{{"held a", false}, {"new b", true}, {"new c", true}}
	if d := cmp.Diff(want, out); d != "" {
		t.Errorf("fragments (-want +got):\n%s", d)
	}
	if m.Reused != 1 || m.Rendered != 2 {
		t.Errorf("Reused %d, Rendered %d; want 1, 2", m.Reused, m.Rendered)
	}
	if f, _ := m.Get("b"); f != "new b" {
		t.Errorf("held for b: %q, want the new fragment", f)
	}
}
