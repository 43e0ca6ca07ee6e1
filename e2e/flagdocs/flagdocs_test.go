package flagdocs

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/switchyard-proxy/switchyard/e2e/testbed/apiserver"
	"github.com/switchyard-proxy/switchyard/e2e/testbed/launch"
)

var (
	helpFlag = regexp.MustCompile(`(?m)^  -([a-z0-9-]+)`)
	// cellFlag is "`--name`", or "`-o`" for a one-letter flag.
	cellFlag = regexp.MustCompile("`--([a-z0-9-]+)`|`-([a-z])`")
)

// helpFlags runs bin with each of helps (the arguments of one --help)
// and returns the flags they print, sorted and once each: a command with
// subcommands documents their flags in each one's --help.
func helpFlags(t *testing.T, bin string, helps ...[]string) []string {
	t.Helper()
	var flags []string
	for _, args := range helps {
		out, err := exec.CommandContext(t.Context(), bin, args...).CombinedOutput()
		if err != nil {
			t.Fatalf("%s %v: %v\n%s", bin, args, err, out)
		}
		for _, m := range helpFlag.FindAllStringSubmatch(string(out), -1) {
			flags = append(flags, m[1])
		}
	}
	slices.Sort(flags)
	flags = slices.Compact(flags)
	if len(flags) < 10 {
		t.Fatalf("read only %v from %s %v", flags, bin, helps)
	}
	return flags
}

// readmeFlags returns the flags in the first cell of the table rows of
// the README section under heading, up to the next heading of its level
// or above, without its subsections named in skip (those document
// another command).
func readmeFlags(t *testing.T, path, heading string, skip ...string) []string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	text, ok := section(string(b), heading)
	if !ok {
		t.Fatalf("%s: no section %q", path, heading)
	}
	for _, sub := range skip {
		if body, ok := section(text, sub); ok {
			text = strings.Replace(text, "\n"+sub+"\n"+body, "\n", 1)
		}
	}
	var flags []string
	for line := range strings.SplitSeq(text, "\n") {
		if cells := strings.Split(line, "|"); len(cells) > 2 && strings.TrimSpace(cells[0]) == "" {
			for _, m := range cellFlag.FindAllStringSubmatch(cells[1], -1) {
				flags = append(flags, m[1]+m[2])
			}
		}
	}
	slices.Sort(flags)
	return slices.Compact(flags)
}

// section returns the body of Markdown text under heading ("## X"): up
// to the next heading of the same level or above, outside code blocks
// (a shell comment is no heading).
func section(text, heading string) (string, bool) {
	_, body, ok := strings.Cut(text, "\n"+heading+"\n")
	if !ok {
		return "", false
	}
	level := strings.Index(heading, " ")
	lines := strings.SplitAfter(body, "\n")
	fenced := false
	for i, l := range lines {
		if strings.HasPrefix(strings.TrimSpace(l), "```") {
			fenced = !fenced
		}
		if hashes := len(l) - len(strings.TrimLeft(l, "#")); !fenced && hashes > 0 && hashes <= level && strings.HasPrefix(l[hashes:], " ") {
			return strings.Join(lines[:i], ""), true
		}
	}
	return body, true
}

func TestREADMEFlagTables(t *testing.T) {
	root, err := apiserver.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Minute)
	defer cancel()
	dir := t.TempDir()
	bin, err := launch.BuildSwitchyard(ctx, dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	ctl, err := launch.Build(ctx, dir, nil, "github.com/switchyard-proxy/switchyard/controlplane/cmd/switchyardctl")
	if err != nil {
		t.Fatal(err)
	}
	help := [][]string{{"--help"}}
	// switchyardctl: the global flags, and each command's own in its --help.
	ctlHelp := [][]string{{"--help"}, {"status", "--help"}, {"explain", "--help"}, {"view", "--help"}, {"diff", "--help"}, {"rollout", "--help"}}
	const ctlSection = "### switchyardctl"
	for _, c := range []struct {
		bin    string
		helps  [][]string
		tables [][2]string // README path under root, section heading
		skip   []string    // subsections of another command's flags
	}{
		{bin.Agent, help, [][2]string{{"nodeagent/README.md", "## Flags"}, {"README.md", "## Node agent: `switchyard-agent`"}}, nil},
		{bin.ControlPlane, help, [][2]string{{"controlplane/README.md", "## Flags"}, {"README.md", "## Control plane: `switchyard-controlplane`"}}, []string{ctlSection}},
		{ctl[0], ctlHelp, [][2]string{{"README.md", ctlSection}}, nil},
	} {
		help := helpFlags(t, c.bin, c.helps...)
		for _, tb := range c.tables {
			t.Run(filepath.Base(c.bin)+"/"+tb[0], func(t *testing.T) {
				if diff := cmp.Diff(help, readmeFlags(t, filepath.Join(root, tb[0]), tb[1], c.skip...)); diff != "" {
					t.Errorf("flags of --help (-) and of the table in %s %q (+) differ:\n%s", tb[0], tb[1], diff)
				}
			})
		}
	}
}

func TestSection(t *testing.T) {
	md := "# T\n## A\n| `--a` |\n```sh\n# a comment, no heading\n## nor this\n```\n### Sub\n| `--s` |\n## B\n| `--b` |\n"
	tests := []struct {
		heading string
		skip    []string
		want    []string
	}{
		{"## A", nil, []string{"a", "s"}},
		{"## A", []string{"### Sub"}, []string{"a"}},
		{"### Sub", nil, []string{"s"}},
		{"## B", nil, []string{"b"}},
	}
	path := filepath.Join(t.TempDir(), "README.md")
	if err := os.WriteFile(path, []byte(md), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tt := range tests {
		if d := cmp.Diff(tt.want, readmeFlags(t, path, tt.heading, tt.skip...)); d != "" {
			t.Errorf("%s without %v (-want +got):\n%s", tt.heading, tt.skip, d)
		}
	}
}
