package view

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/protobuf/testing/protocmp"

	switchyardv1 "github.com/switchyard-proxy/switchyard/proto/switchyard/v1"
)

func svc(name, version string) *switchyardv1.Resource {
	return &switchyardv1.Resource{Name: name, Version: version, Body: &switchyardv1.Resource_Service{Service: &switchyardv1.ServiceView{}}}
}

func TestWith(t *testing.T) {
	base := &View{SystemVersion: "s1", Resources: map[string]*switchyardv1.Resource{"ns/a": svc("ns/a", "1"), "ns/b": svc("ns/b", "1")}}
	tests := []struct {
		name string
		u    *Update
		want map[string]string
	}{
		{"add", &Update{SystemVersion: "s2", Resources: map[string]*switchyardv1.Resource{"ns/c": svc("ns/c", "1")}},
			map[string]string{"ns/a": "1", "ns/b": "1", "ns/c": "1"}},
		{"change and remove", &Update{SystemVersion: "s2", Resources: map[string]*switchyardv1.Resource{"ns/a": svc("ns/a", "2")}, Removed: []string{"ns/b"}},
			map[string]string{"ns/a": "2"}},
		{"remove unknown", &Update{SystemVersion: "s2", Removed: []string{"ns/x"}},
			map[string]string{"ns/a": "1", "ns/b": "1"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := base.With(tt.u)
			if diff := cmp.Diff(tt.want, got.Versions()); diff != "" {
				t.Errorf("versions (-want +got):\n%s", diff)
			}
			if got.SystemVersion != "s2" {
				t.Errorf("SystemVersion = %q", got.SystemVersion)
			}
			if diff := cmp.Diff(map[string]string{"ns/a": "1", "ns/b": "1"}, base.Versions()); diff != "" {
				t.Errorf("base modified (-want +got):\n%s", diff)
			}
		})
	}
}

// TestTriggerTimes: an update's usable trigger times are those sent with
// its resources, within the agent's life: kube-proxy observes nothing
// from before its start, and a time in the future is no latency.
func TestTriggerTimes(t *testing.T) {
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	end := start.Add(time.Hour)
	res := map[string]*switchyardv1.Resource{"ns/a": svc("ns/a", "1"), "ns/b": svc("ns/b", "1")}
	tests := []struct {
		name     string
		triggers map[string][]time.Time
		want     []time.Time
	}{
		{name: "none sent (first batch, restore, Service-only change)"},
		{name: "one per slice, oldest first", triggers: map[string][]time.Time{
			"ns/b": {end.Add(-time.Second)}, "ns/a": {end.Add(-2 * time.Second), end.Add(-3 * time.Second)}},
			want: []time.Time{end.Add(-3 * time.Second), end.Add(-2 * time.Second), end.Add(-time.Second)}},
		{name: "before the agent's start", triggers: map[string][]time.Time{"ns/a": {start.Add(-time.Nanosecond), start}},
			want: []time.Time{start}},
		{name: "in the future", triggers: map[string][]time.Time{"ns/a": {end.Add(time.Nanosecond), time.Date(2099, 1, 1, 0, 0, 0, 0, time.UTC), end}},
			want: []time.Time{end}},
		{name: "for a resource the update does not carry", triggers: map[string][]time.Time{"ns/gone": {end.Add(-time.Second)}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			u := &Update{Resources: res, Triggers: tc.triggers}
			if diff := cmp.Diff(tc.want, u.TriggerTimes(start, end)); diff != "" {
				t.Errorf("TriggerTimes (-want +got):\n%s", diff)
			}
		})
	}
}

func TestWithAdded(t *testing.T) {
	base := &View{SystemVersion: "s1", Resources: map[string]*switchyardv1.Resource{"ns/a": svc("ns/a", "1"), "ns/b": svc("ns/b", "1")}}
	u := &Update{SystemVersion: "s2", Resources: map[string]*switchyardv1.Resource{"ns/a": svc("ns/a", "2"), "ns/c": svc("ns/c", "1")},
		Removed: []string{"ns/b"}}
	got := base.WithAdded(u)
	if diff := cmp.Diff(map[string]string{"ns/a": "2", "ns/b": "1", "ns/c": "1"}, got.Versions()); diff != "" {
		t.Errorf("WithAdded (-want +got):\n%s", diff)
	}
	if got.SystemVersion != "s1" {
		t.Errorf("SystemVersion = %q, want the base's s1", got.SystemVersion)
	}
	if len(base.Resources) != 2 {
		t.Errorf("base modified: %v", base.Versions())
	}
}

func TestMerge(t *testing.T) {
	res := func(kv ...string) map[string]*switchyardv1.Resource {
		out := map[string]*switchyardv1.Resource{}
		for i := 0; i < len(kv); i += 2 {
			out[kv[i]] = svc(kv[i], kv[i+1])
		}
		return out
	}
	tests := []struct {
		name        string
		a, b        *Update
		wantRes     map[string]string
		wantRemoved []string
	}{
		{"nil a", nil, &Update{SystemVersion: "s2", Resources: res("ns/a", "1"), Removed: []string{"ns/x"}},
			map[string]string{"ns/a": "1"}, []string{"ns/x"}},
		{"b wins", &Update{SystemVersion: "s1", Resources: res("ns/a", "1", "ns/b", "1")},
			&Update{SystemVersion: "s2", Resources: res("ns/a", "2")},
			map[string]string{"ns/a": "2", "ns/b": "1"}, nil},
		{"a later removal keeps the earlier resource", &Update{SystemVersion: "s1", Resources: res("ns/a", "1")},
			&Update{SystemVersion: "s2", Removed: []string{"ns/a", "ns/y"}},
			map[string]string{"ns/a": "1"}, []string{"ns/y"}},
		{"removals of both, once", &Update{SystemVersion: "s1", Removed: []string{"ns/y", "ns/x"}},
			&Update{SystemVersion: "s2", Removed: []string{"ns/x"}},
			map[string]string{}, []string{"ns/x", "ns/y"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := Merge(tt.a, tt.b)
			gotRes := map[string]string{}
			for name, r := range got.Resources {
				gotRes[name] = r.GetVersion()
			}
			if diff := cmp.Diff(tt.wantRes, gotRes); diff != "" {
				t.Errorf("resources (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tt.wantRemoved, got.Removed); diff != "" {
				t.Errorf("removed (-want +got):\n%s", diff)
			}
			if got.SystemVersion != "s2" {
				t.Errorf("SystemVersion = %q", got.SystemVersion)
			}
		})
	}
}

// TestWithStateMatchesState applies batches that add, replace, remove and
// change the kind of resources, the node config included, and checks
// that the state carried along is the one State builds from the view.
func TestWithStateMatchesState(t *testing.T) {
	nc := func(name, node string) *switchyardv1.Resource {
		return &switchyardv1.Resource{Name: name, Body: &switchyardv1.Resource_NodeConfig{NodeConfig: &switchyardv1.NodeConfig{NodeName: node}}}
	}
	batches := [][]*Update{
		{{SystemVersion: "s1", Resources: map[string]*switchyardv1.Resource{"ns/a": svc("ns/a", "1"), "node": nc("node", "n1")}}},
		{{SystemVersion: "s2", Resources: map[string]*switchyardv1.Resource{"ns/b": svc("ns/b", "1")}},
			{SystemVersion: "s3", Resources: map[string]*switchyardv1.Resource{"node": nc("node", "n2")}, Removed: []string{"ns/a"}}},
		{{SystemVersion: "s4", Removed: []string{"node", "ns/x"}}},
		{{SystemVersion: "s5", Resources: map[string]*switchyardv1.Resource{"ns/b": nc("ns/b", "n3")}}},
		{{SystemVersion: "s6", Resources: map[string]*switchyardv1.Resource{"ns/b": svc("ns/b", "2"), "ns/a": svc("ns/a", "3")}}},
		{},
	}
	v := &View{Resources: map[string]*switchyardv1.Resource{}}
	st := v.State()
	for i, b := range batches {
		before, beforeState := v.Versions(), v.State()
		next, nst := v.WithState(st, b...)
		if diff := cmp.Diff(next.State(), nst, protocmp.Transform()); diff != "" {
			t.Fatalf("batch %d: carried state differs from State (-built +carried):\n%s", i, diff)
		}
		if diff := cmp.Diff(before, v.Versions()); diff != "" {
			t.Fatalf("batch %d: view modified (-before +after):\n%s", i, diff)
		}
		if diff := cmp.Diff(beforeState, st, protocmp.Transform()); diff != "" {
			t.Fatalf("batch %d: state modified (-before +after):\n%s", i, diff)
		}
		v, st = next, nst
	}
}
