package readme

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestRead(t *testing.T) {
	md := "# t\n\n<!-- example: one -->\n```sh\n# a comment\ngrpcurl -d '{}' \\\n  host:1 svc/M\n\nswitchyardctl status\n```\n\n```json\n{\n  \"a\": 1\n}\n```\n" +
		"<!-- example: two -->\n```sh\necho hi\n```\ntext\n```json\n{}\n```\n" +
		"<!-- example: table -->\n```sh\nswitchyardctl status\n```\n\n```text\nNODE    IN SYNC\nnode-a  yes\n```\n" +
		"<!-- example: both -->\n```sh\nx\n```\n```text\nt\n```\n```json\n[]\n```\n```text\nnot this\n```\n"
	path := filepath.Join(t.TempDir(), "README.md")
	if err := os.WriteFile(path, []byte(md), 0o644); err != nil {
		t.Fatal(err)
	}
	got, err := Read(path)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]Example{
		"one":   {Name: "one", Commands: []string{"grpcurl -d '{}' host:1 svc/M", "switchyardctl status"}, Output: "{\n  \"a\": 1\n}"},
		"two":   {Name: "two", Commands: []string{"echo hi"}},
		"table": {Name: "table", Commands: []string{"switchyardctl status"}, Text: "NODE    IN SYNC\nnode-a  yes"},
		"both":  {Name: "both", Commands: []string{"x"}, Output: "[]", Text: "t"},
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

func TestSameText(t *testing.T) {
	readme := "api: available  settings: … (flags)\nNODE    DESIRED  IN SYNC\nnode-a  …        no\n"
	tests := []struct {
		name string
		got  string
		want bool
	}{
		{"hashes and padding differ", "api: available  settings: 0123456789abcdef (flags)\n" +
			"NODE    DESIRED           IN SYNC\nnode-a  fedcba9876543210  no  \n\n", true},
		{"tabs", "api: available\tsettings: 0123456789abcdef (flags)\nNODE DESIRED IN SYNC\nnode-a 0123456789abcdef no", true},
		{"a value differs", "api: available  settings: 0123456789abcdef (flags)\nNODE  DESIRED  IN SYNC\nnode-a  0123456789abcdef  yes\n", false},
		{"a short hex word is not a hash", "api: available  settings: abc (flags)\nNODE DESIRED IN SYNC\nnode-a 0123456789abcdef no", false},
		{"a line more", "api: available  settings: 0123456789abcdef (flags)\nNODE DESIRED IN SYNC\nnode-a 0123456789abcdef no\nnode-b - -", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := SameText(readme, tt.got); got != tt.want {
				t.Errorf("SameText = %v, want %v\nREADME: %q\ngot:    %q", got, tt.want, Normalize(readme), Normalize(tt.got))
			}
		})
	}
}
