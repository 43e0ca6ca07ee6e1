package persist

import (
	"os"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestSaveLoadControlPlanes(t *testing.T) {
	tests := []struct {
		name  string
		addrs []string
		want  []string
	}{
		{name: "both families", addrs: []string{"10.0.0.1:18000", "[fd00::1]:18000"}, want: []string{"10.0.0.1:18000", "[fd00::1]:18000"}},
		{name: "empty", addrs: nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			s, err := New(dir, "node-a")
			if err != nil {
				t.Fatal(err)
			}
			if err := s.SaveControlPlanes([]string{"10.9.9.9:1"}); err != nil {
				t.Fatal(err)
			}
			if err := s.SaveControlPlanes(tc.addrs); err != nil {
				t.Fatal(err)
			}
			got, found, err := s.LoadControlPlanes()
			if err != nil || !found {
				t.Fatalf("LoadControlPlanes = %v, %t", err, found)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("LoadControlPlanes (-want +got):\n%s", diff)
			}
			entries, err := os.ReadDir(dir)
			if err != nil {
				t.Fatal(err)
			}
			if len(entries) != 1 || entries[0].Name() != ControlPlanesFileName {
				t.Errorf("state dir holds %v, want only %s (no temp files left)", entries, ControlPlanesFileName)
			}
		})
	}
}

func TestLoadControlPlanesFiles(t *testing.T) {
	tests := []struct {
		name      string
		content   *string // nil: no file
		want      []string
		wantFound bool
		wantErr   bool
	}{
		{name: "missing"},
		{name: "hand-written, empty entries dropped", content: ptr(`{"addresses": ["10.0.0.1:18000", "", "10.0.0.2:18000"]}`),
			want: []string{"10.0.0.1:18000", "10.0.0.2:18000"}, wantFound: true},
		{name: "no addresses", content: ptr(`{}`), wantFound: true},
		{name: "corrupt", content: ptr("10.0.0.1:18000\n"), wantErr: true},
		{name: "empty file", content: ptr(""), wantErr: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s, err := New(t.TempDir(), "node-a")
			if err != nil {
				t.Fatal(err)
			}
			if tc.content != nil {
				if err := os.WriteFile(s.ControlPlanesPath(), []byte(*tc.content), 0o600); err != nil {
					t.Fatal(err)
				}
			}
			got, found, err := s.LoadControlPlanes()
			if (err != nil) != tc.wantErr || found != tc.wantFound {
				t.Fatalf("LoadControlPlanes = %v, found %t; want error %t, found %t", err, found, tc.wantErr, tc.wantFound)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("LoadControlPlanes (-want +got):\n%s", diff)
			}
		})
	}
}

func ptr(s string) *string { return &s }
