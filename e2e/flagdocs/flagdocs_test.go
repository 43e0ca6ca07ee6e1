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
	cellFlag = regexp.MustCompile("`--([a-z0-9-]+)`")
)

// helpFlags runs bin --help and returns the flags it prints, sorted.
func helpFlags(t *testing.T, bin string) []string {
	t.Helper()
	out, err := exec.CommandContext(t.Context(), bin, "--help").CombinedOutput()
	if err != nil {
		t.Fatalf("%s --help: %v\n%s", bin, err, out)
	}
	var flags []string
	for _, m := range helpFlag.FindAllStringSubmatch(string(out), -1) {
		flags = append(flags, m[1])
	}
	slices.Sort(flags)
	if len(flags) < 10 {
		t.Fatalf("read only %v from %s --help:\n%s", flags, bin, out)
	}
	return flags
}

// readmeFlags returns the flags in the first cell of the table rows of
// the README section under heading (up to the next "## " heading).
func readmeFlags(t *testing.T, path, heading string) []string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	_, section, ok := strings.Cut(string(b), "\n"+heading+"\n")
	if !ok {
		t.Fatalf("%s: no section %q", path, heading)
	}
	if end := strings.Index(section, "\n## "); end >= 0 {
		section = section[:end]
	}
	var flags []string
	for line := range strings.SplitSeq(section, "\n") {
		if cells := strings.Split(line, "|"); len(cells) > 2 && strings.TrimSpace(cells[0]) == "" {
			for _, m := range cellFlag.FindAllStringSubmatch(cells[1], -1) {
				flags = append(flags, m[1])
			}
		}
	}
	slices.Sort(flags)
	return slices.Compact(flags)
}

func TestREADMEFlagTables(t *testing.T) {
	root, err := apiserver.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Minute)
	defer cancel()
	bin, err := launch.BuildSwitchyard(ctx, t.TempDir(), nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		bin    string
		tables [][2]string // README path under root, section heading
	}{
		{bin.Agent, [][2]string{{"nodeagent/README.md", "## Flags"}, {"README.md", "## Node agent: `switchyard-agent`"}}},
		{bin.ControlPlane, [][2]string{{"controlplane/README.md", "## Flags"}, {"README.md", "## Control plane: `switchyard-controlplane`"}}},
	} {
		help := helpFlags(t, c.bin)
		for _, tb := range c.tables {
			t.Run(filepath.Base(c.bin)+"/"+tb[0], func(t *testing.T) {
				if diff := cmp.Diff(help, readmeFlags(t, filepath.Join(root, tb[0]), tb[1])); diff != "" {
					t.Errorf("flags of --help (-) and of the table in %s %q (+) differ:\n%s", tb[0], tb[1], diff)
				}
			})
		}
	}
}
