package readme

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestRead(t *testing.T) {
	md := "# t\n\n<!-- example: one -->\n```sh\n# a comment\ngrpcurl -d '{}' \\\n  host:1 svc/M\n\nswitchyardctl status\n```\n\n```json\n{\n  \"a\": 1\n}\n```\n" +
		"<!-- example: two -->\n```sh\necho hi\n```\ntext\n```json\n{}\n```\n"
	path := filepath.Join(t.TempDir(), "README.md")
	if err := os.WriteFile(path, []byte(md), 0o644); err != nil {
		t.Fatal(err)
	}
	got, err := Read(path)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]Example{
		"one": {Name: "one", Commands: []string{"grpcurl -d '{}' host:1 svc/M", "switchyardctl status"}, Output: "{\n  \"a\": 1\n}"},
		"two": {Name: "two", Commands: []string{"echo hi"}},
	}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("Read (-want +got):\n%s", d)
	}
}

func TestReadRefusesAMarkerWithoutBlock(t *testing.T) {
	path := filepath.Join(t.TempDir(), "README.md")
	if err := os.WriteFile(path, []byte("<!-- example: x -->\ntext\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := Read(path); err == nil {
		t.Error("Read accepted a marker without an sh block")
	}
}
