package persist

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/protobuf/testing/protocmp"

	"github.com/switchyard-proxy/switchyard/nodeagent/internal/view"
	switchyardv1 "github.com/switchyard-proxy/switchyard/proto/switchyard/v1"
)

func TestSaveLoad(t *testing.T) {
	tests := []struct {
		name string
		v    *view.View
	}{
		{"empty", &view.View{Resources: map[string]*switchyardv1.Resource{}}},
		{"services and config", &view.View{SystemVersion: "sv1", Resources: map[string]*switchyardv1.Resource{
			"ns/a": {Name: "ns/a", Version: "1", Body: &switchyardv1.Resource_Service{Service: &switchyardv1.ServiceView{Namespace: "ns", Name: "a", ClusterIps: []string{"10.0.0.1"}}}},
			"node": {Name: "node", Version: "2", Body: &switchyardv1.Resource_NodeConfig{NodeConfig: &switchyardv1.NodeConfig{NodeName: "node"}}},
		}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			s, err := New(dir)
			if err != nil {
				t.Fatal(err)
			}
			if err := s.Save(tt.v); err != nil {
				t.Fatal(err)
			}
			got, found, err := s.Load()
			if err != nil || !found {
				t.Fatalf("Load = %v, %t", err, found)
			}
			if diff := cmp.Diff(tt.v, got, protocmp.Transform()); diff != "" {
				t.Errorf("Load (-want +got):\n%s", diff)
			}
			entries, err := os.ReadDir(dir)
			if err != nil {
				t.Fatal(err)
			}
			if len(entries) != 1 || entries[0].Name() != FileName {
				t.Errorf("state dir holds %v, want only %s (no temp files left)", entries, FileName)
			}
		})
	}
}

func TestLoadMissingAndCorrupt(t *testing.T) {
	dir := t.TempDir()
	s, err := New(filepath.Join(dir, "sub"))
	if err != nil {
		t.Fatal(err)
	}
	v, found, err := s.Load()
	if err != nil || found || len(v.Resources) != 0 {
		t.Fatalf("Load of missing = %v, %t, %v", v, found, err)
	}
	if err := os.WriteFile(s.Path(), []byte{0xff, 0xff, 0xff}, 0o600); err != nil {
		t.Fatal(err)
	}
	if _, _, err := s.Load(); err == nil {
		t.Error("Load of corrupt file succeeded")
	}
}

func TestSaveReplaces(t *testing.T) {
	s, err := New(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	for _, ver := range []string{"a", "b"} {
		if err := s.Save(&view.View{SystemVersion: ver, Resources: map[string]*switchyardv1.Resource{}}); err != nil {
			t.Fatal(err)
		}
	}
	got, _, err := s.Load()
	if err != nil || got.SystemVersion != "b" {
		t.Errorf("Load = %v, %v; want version b", got, err)
	}
}
