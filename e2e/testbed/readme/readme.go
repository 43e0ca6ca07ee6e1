// Package readme reads the examples a README shows so that tests run
// them as printed: an example is a fenced `sh` block right after a line
// `<!-- example: NAME -->`, optionally followed by a fenced `json` block
// and/or a fenced `text` block, the output the example prints (JSON, or
// text such as a table, with content hashes written as "…"; see
// SameText and JSON). Documentation that a test runs cannot drift from
// the code.
package readme

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"regexp"
	"strings"
)

// Example is one marked example.
type Example struct {
	Name string
	// Commands are the block's commands, continuation lines joined and
	// comment lines dropped.
	Commands []string
	// Steps are the same commands cut at each comment: a README's
	// numbered steps, so that a test can do between two of them what the
	// comment says (`# 2. … Then wait.`).
	Steps []Step
	// Output is the json block after it, "" when none follows.
	Output string
	// Text is the text block after it, "" when none follows.
	Text string
}

// Step is the commands under one comment of an example.
type Step struct {
	// Comment is the comment's lines without "#", joined by spaces; ""
	// for commands before the first comment.
	Comment  string
	Commands []string
}

const marker = "<!-- example: "

// Read returns the examples of the Markdown file at path by name.
func Read(path string) (map[string]Example, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var lines []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		lines = append(lines, sc.Text())
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("read %s: %w", path, err)
	}
	out := map[string]Example{}
	for i := 0; i < len(lines); i++ {
		l := strings.TrimSpace(lines[i])
		if !strings.HasPrefix(l, marker) || !strings.HasSuffix(l, "-->") {
			continue
		}
		name := strings.TrimSpace(strings.TrimSuffix(strings.TrimPrefix(l, marker), "-->"))
		sh, next, ok := fenced(lines, i+1, "sh")
		if !ok {
			return nil, fmt.Errorf("%s:%d: example %q: no sh block follows", path, i+1, name)
		}
		ex := Example{Name: name, Steps: steps(sh)}
		for _, s := range ex.Steps {
			ex.Commands = append(ex.Commands, s.Commands...)
		}
		// The output blocks may come in either order, each at most once.
		for range 2 {
			if js, after, ok := fenced(lines, next, "json"); ok && ex.Output == "" {
				ex.Output, next = strings.Join(js, "\n"), after
			} else if txt, after, ok := fenced(lines, next, "text"); ok && ex.Text == "" {
				ex.Text, next = strings.Join(txt, "\n"), after
			}
		}
		if _, dup := out[name]; dup {
			return nil, fmt.Errorf("%s:%d: example %q twice", path, i+1, name)
		}
		out[name] = ex
		i = next - 1
	}
	return out, nil
}

// fenced returns the body of the fenced block of language lang starting
// at line i (blank lines before it allowed) and the line after it.
func fenced(lines []string, i int, lang string) (body []string, next int, ok bool) {
	for i < len(lines) && strings.TrimSpace(lines[i]) == "" {
		i++
	}
	if i >= len(lines) || strings.TrimSpace(lines[i]) != "```"+lang {
		return nil, i, false
	}
	for j := i + 1; j < len(lines); j++ {
		if strings.TrimSpace(lines[j]) == "```" {
			return lines[i+1 : j], j + 1, true
		}
	}
	return nil, i, false
}

// steps joins continuation lines, drops blank lines, and cuts the commands
// at each comment, which becomes the next step's.
func steps(body []string) []Step {
	var out []Step
	cur := ""
	for _, l := range body {
		t := strings.TrimSpace(l)
		if cur == "" && t == "" {
			continue
		}
		if cur == "" && strings.HasPrefix(t, "#") {
			// A comment after commands starts a step; one after a
			// comment goes on with it.
			if len(out) == 0 || len(out[len(out)-1].Commands) > 0 {
				out = append(out, Step{})
			}
			s := &out[len(out)-1]
			s.Comment = strings.TrimSpace(s.Comment + " " + strings.TrimSpace(strings.TrimLeft(t, "#")))
			continue
		}
		if len(out) == 0 {
			out = append(out, Step{})
		}
		if strings.HasSuffix(t, "\\") {
			cur += strings.TrimSuffix(t, "\\")
			continue
		}
		s := &out[len(out)-1]
		s.Commands = append(s.Commands, cur+t)
		cur = ""
	}
	// A comment that no command follows is no step.
	if len(out) > 0 && len(out[len(out)-1].Commands) == 0 {
		out = out[:len(out)-1]
	}
	return out
}

// hash is a content hash as the control plane prints versions and
// settings hashes: 16 or more lowercase hex digits standing alone.
var hash = regexp.MustCompile(`\b[0-9a-f]{16,64}\b`)

// timestamp is a point in time as the examples print one: RFC 3339
// (protojson's Timestamps: "2026-11-01T10:15:42.123Z") or Go's
// time.Time.String (kube-proxy's /healthz: "2026-11-01 10:15:42.5 +0000
// UTC m=+31.500000001", the monotonic reading included when there is one).
var timestamp = regexp.MustCompile(`\b\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}:\d{2}(?:\.\d+)?` +
	`(?:Z|[+-]\d{2}:\d{2}| [+-]\d{4} [A-Z]+(?: m=[+-]\d+\.\d+)?)?`)

// quantile is a measured latency as GetService's summary prints one
// ("p50 330ms", "p99 1.2s").
var quantile = regexp.MustCompile(`\b(p50|p99) [0-9][0-9.]*(?:ns|µs|us|ms|s|m[0-9.]*s?|h[0-9.]*m?)`)

// unknowable replaces what a README cannot know, timestamps, content
// hashes and measured latencies, by "…"; the README may show either "…"
// or a sample value.
func unknowable(s string) string {
	s = quantile.ReplaceAllString(s, "$1 …")
	return hash.ReplaceAllString(timestamp.ReplaceAllString(s, "…"), "…")
}

// Normalize makes an example's text output comparable with what a README
// shows: timestamps and content hashes become "…" (the README cannot know
// them), runs of blanks one space (a table's padding follows the hashes'
// width), and trailing blanks and blank lines go.
func Normalize(s string) string {
	s = unknowable(s)
	lines := strings.Split(s, "\n")
	for i, l := range lines {
		lines[i] = strings.Join(strings.Fields(l), " ")
	}
	return strings.TrimRight(strings.Join(lines, "\n"), "\n")
}

// SameText reports whether got, an example's output, is the text block
// want once both are normalized.
func SameText(want, got string) bool { return Normalize(want) == Normalize(got) }

// JSON decodes s, the JSON an example prints or a README's json block: a
// stream of values (grpcurl prints one, jq one per result), with every
// timestamp and content hash inside a string as "…" (see Normalize), so
// that two decodings compare equal when the examples' output matches the
// README's.
func JSON(s string) ([]any, error) {
	dec := json.NewDecoder(strings.NewReader(s))
	dec.UseNumber()
	var out []any
	for {
		var v any
		err := dec.Decode(&v)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("not a stream of JSON values: %w", err)
		}
		out = append(out, normalizeJSON(v))
	}
	if len(out) == 0 {
		return nil, errors.New("no JSON value")
	}
	return out, nil
}

func normalizeJSON(v any) any {
	switch v := v.(type) {
	case string:
		return unknowable(v)
	case []any:
		for i := range v {
			v[i] = normalizeJSON(v[i])
		}
	case map[string]any:
		for k := range v {
			v[k] = normalizeJSON(v[k])
		}
	}
	return v
}
