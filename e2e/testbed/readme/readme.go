// Package readme reads the examples a README shows so that tests run
// them as printed: an example is a fenced `sh` block right after a line
// `<!-- example: NAME -->`, optionally followed by a fenced `json` block,
// the output the example prints. Documentation that a test runs cannot
// drift from the code.
package readme

import (
	"bufio"
	"fmt"
	"os"
	"strings"
)

// Example is one marked example.
type Example struct {
	Name string
	// Commands are the block's commands, continuation lines joined and
	// comment lines dropped.
	Commands []string
	// Output is the json block after it, "" when none follows.
	Output string
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
		ex := Example{Name: name, Commands: commands(sh)}
		if js, after, ok := fenced(lines, next, "json"); ok {
			ex.Output, next = strings.Join(js, "\n"), after
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

// commands joins continuation lines and drops comments and blank lines.
func commands(body []string) []string {
	var out []string
	cur := ""
	for _, l := range body {
		t := strings.TrimSpace(l)
		if cur == "" && (t == "" || strings.HasPrefix(t, "#")) {
			continue
		}
		if strings.HasSuffix(t, "\\") {
			cur += strings.TrimSuffix(t, "\\")
			continue
		}
		out = append(out, cur+t)
		cur = ""
	}
	return out
}
