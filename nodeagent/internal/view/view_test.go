package view

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/protobuf/types/known/timestamppb"

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

func TestOldestTrigger(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	u := &Update{Resources: map[string]*switchyardv1.Resource{
		"ns/a": {Name: "ns/a", Body: &switchyardv1.Resource_Service{Service: &switchyardv1.ServiceView{LastChangeTriggerTime: timestamppb.New(t0)}}},
		"ns/b": {Name: "ns/b", Body: &switchyardv1.Resource_Service{Service: &switchyardv1.ServiceView{LastChangeTriggerTime: timestamppb.New(t0.Add(time.Second))}}},
		"node": {Name: "node", Body: &switchyardv1.Resource_NodeConfig{NodeConfig: &switchyardv1.NodeConfig{}}},
	}}
	got, ok := u.OldestTrigger()
	if !ok || !got.Equal(t0) {
		t.Errorf("OldestTrigger = %v, %t", got, ok)
	}
	if _, ok := (&Update{}).OldestTrigger(); ok {
		t.Error("OldestTrigger of empty update reported one")
	}
}
