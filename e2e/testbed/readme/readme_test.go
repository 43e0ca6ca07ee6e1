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
		"<!-- example: both -->\n```sh\nx\n```\n```text\nt\n```\n```json\n[]\n```\n```text\nnot this\n```\n" +
		"<!-- example: steps -->\n```sh\nns=x\n# 1. First.\na \\\n  b\n\n# 2. Second,\n#    on two lines. Then wait.\nc\nd\n# a comment no command follows\n```\n"
	path := filepath.Join(t.TempDir(), "README.md")
	if err := os.WriteFile(path, []byte(md), 0o644); err != nil {
		t.Fatal(err)
	}
	got, err := Read(path)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]Example{
		"one": {Name: "one", Commands: []string{"grpcurl -d '{}' host:1 svc/M", "switchyardctl status"},
			Steps:  []Step{{Comment: "a comment", Commands: []string{"grpcurl -d '{}' host:1 svc/M", "switchyardctl status"}}},
			Output: "{\n  \"a\": 1\n}"},
		"two":   {Name: "two", Commands: []string{"echo hi"}, Steps: []Step{{Commands: []string{"echo hi"}}}},
		"table": {Name: "table", Commands: []string{"switchyardctl status"}, Steps: []Step{{Commands: []string{"switchyardctl status"}}}, Text: "NODE    IN SYNC\nnode-a  yes"},
		"both":  {Name: "both", Commands: []string{"x"}, Steps: []Step{{Commands: []string{"x"}}}, Output: "[]", Text: "t"},
		"steps": {Name: "steps", Commands: []string{"ns=x", "a b", "c", "d"}, Steps: []Step{
			{Commands: []string{"ns=x"}},
			{Comment: "1. First.", Commands: []string{"a b"}},
			{Comment: "2. Second, on two lines. Then wait.", Commands: []string{"c", "d"}},
		}},
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

func TestNormalizeTimes(t *testing.T) {
	tests := []struct{ in, want string }{
		{`"lastCheck": "2026-12-03T20:04:05.527291844Z",`, `"lastCheck": "…",`},
		{`"lastCheck": "2026-12-03T20:04:05Z"`, `"lastCheck": "…"`},
		{`since 2026-12-03T20:04:05+02:00, views may be stale`, `since …, views may be stale`},
		{`"lastUpdated": "2026-12-03 20:04:06.718354463 +0000 UTC m=+6.553269140",`, `"lastUpdated": "…",`},
		{`"currentTime": "2026-12-03 20:04:06 +0000 UTC"`, `"currentTime": "…"`},
		{`version 2026 of 12-03`, `version 2026 of 12-03`},
		{`live on 2 of 2 nodes (p50 330ms, p99 1.2s)`, `live on 2 of 2 nodes (p50 …, p99 …)`},
		{`(p50 1m5s, p99 950µs)`, `(p50 …, p99 …)`},
		{`pause 30s`, `pause 30s`},
	}
	for _, tt := range tests {
		if got := Normalize(tt.in); got != tt.want {
			t.Errorf("Normalize(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

func TestJSON(t *testing.T) {
	readme := "{\n  \"name\": \"node-0\",\n  \"drift\": {\"lastCheck\": \"2026-11-01T10:15:42.5Z\", \"repairs\": \"1\"}\n}\n" +
		"{\"name\": \"node-1\", \"version\": \"…\"}\n"
	tests := []struct {
		name string
		got  string
		same bool
	}{
		{"times, hashes and layout differ", `{"drift":{"repairs":"1","lastCheck":"2026-12-03T20:04:05.527291844Z"},"name":"node-0"}` +
			"\n" + `{"name":"node-1","version":"0123456789abcdef"}`, true},
		{"a value differs", `{"drift":{"repairs":"2","lastCheck":"2026-12-03T20:04:05Z"},"name":"node-0"}{"name":"node-1","version":"0123456789abcdef"}`, false},
		{"a field more", `{"drift":{"repairs":"1","lastCheck":"2026-12-03T20:04:05Z","error":"x"},"name":"node-0"}{"name":"node-1","version":"0123456789abcdef"}`, false},
		{"a value less", `{"drift":{"repairs":"1","lastCheck":"2026-12-03T20:04:05Z"},"name":"node-0"}`, false},
	}
	want, err := JSON(readme)
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := JSON(tt.got)
			if err != nil {
				t.Fatal(err)
			}
			if d := cmp.Diff(want, got); (d == "") != tt.same {
				t.Errorf("same = %v, want %v (-README +got):\n%s", d == "", tt.same, d)
			}
		})
	}
	for _, bad := range []string{"", "  \n", "{\"a\": 1", "503 {"} {
		if _, err := JSON(bad); err == nil {
			t.Errorf("JSON(%q) accepted it", bad)
		}
	}
}
