package persist

import (
	"os"
	"path/filepath"
	"sort"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestRemove(t *testing.T) {
	tests := []struct {
		name        string
		files       []string
		wantRemoved []string
		wantLeft    []string
	}{
		{name: "missing dir", files: nil},
		{name: "empty dir", files: []string{}, wantLeft: []string{}},
		{
			name:        "state files and an interrupted save go, others stay",
			files:       []string{FileName, PendingFileName, ControlPlanesFileName, "." + FileName + ".tmp-123", "notes.txt", "view.pb.bak"},
			wantRemoved: []string{"." + FileName + ".tmp-123", ControlPlanesFileName, PendingFileName, FileName},
			wantLeft:    []string{"notes.txt", "view.pb.bak"},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "state")
			if tc.files != nil {
				if err := os.Mkdir(dir, 0o700); err != nil {
					t.Fatal(err)
				}
			}
			for _, f := range tc.files {
				if err := os.WriteFile(filepath.Join(dir, f), []byte("x"), 0o600); err != nil {
					t.Fatal(err)
				}
			}
			removed, err := Remove(dir)
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, p := range removed {
				got = append(got, filepath.Base(p))
			}
			sort.Strings(got)
			if diff := cmp.Diff(tc.wantRemoved, got); diff != "" {
				t.Errorf("removed (-want +got):\n%s", diff)
			}
			entries, err := os.ReadDir(dir)
			if tc.files == nil {
				if !os.IsNotExist(err) {
					t.Errorf("Remove created %s (err %v)", dir, err)
				}
				return
			}
			left := []string{}
			for _, e := range entries {
				left = append(left, e.Name())
			}
			if diff := cmp.Diff(tc.wantLeft, left); diff != "" {
				t.Errorf("left (-want +got):\n%s", diff)
			}
		})
	}
}
