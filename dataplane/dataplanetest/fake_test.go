package dataplanetest

import (
	"errors"
	"slices"
	"testing"

	"github.com/switchyard-proxy/switchyard/dataplane"
	switchyardv1 "github.com/switchyard-proxy/switchyard/proto/switchyard/v1"
)

func TestFakeKeepsLastGoodStateOnFailure(t *testing.T) {
	f := New("fake")
	good := &dataplane.State{Services: map[string]*switchyardv1.ServiceView{
		"ns/a": {Namespace: "ns", Name: "a", ClusterIps: []string{"10.0.0.1"}},
	}}
	if err := f.Apply(t.Context(), good, dataplane.ApplyOptions{Full: true}); err != nil {
		t.Fatal(err)
	}
	boom := errors.New("boom")
	f.SetHook(func(string, *dataplane.State, dataplane.ApplyOptions) error { return boom })
	bad := &dataplane.State{Services: map[string]*switchyardv1.ServiceView{}}
	if err := f.Apply(t.Context(), bad, dataplane.ApplyOptions{}); !errors.Is(err, boom) {
		t.Fatalf("Apply error = %v, want %v", err, boom)
	}
	if got := f.Services(); !slices.Equal(got, []string{"ns/a"}) {
		t.Errorf("Services = %v, want [ns/a]", got)
	}
	if got, want := f.Dump(), "ns/a ips=10.0.0.1 cluster=0 local=0\n"; got != want {
		t.Errorf("Dump = %q, want %q", got, want)
	}
	if got := len(f.Calls()); got != 2 {
		t.Errorf("calls = %d, want 2", got)
	}
	if f.Cleanups() != 0 {
		t.Errorf("Cleanups = %d, want 0", f.Cleanups())
	}
}
