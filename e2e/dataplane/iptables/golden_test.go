package iptables

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/switchyard-proxy/switchyard/e2e/testbed/netns"
)

// TestGoldenRulesAcceptedByKernel restores every golden ruleset of
// dataplane/iptables into a fresh node namespace, with both flavours and
// both families, after its hairpin set, so the goldens are known to be
// valid iptables and ipset input.
func TestGoldenRulesAcceptedByKernel(t *testing.T) {
	files, err := filepath.Glob("../../../dataplane/iptables/testdata/*/want.rules")
	if err != nil || len(files) == 0 {
		t.Fatalf("no golden files: %v", err)
	}
	topo := netns.New(t, netns.Spec{Nodes: 1})
	for _, fl := range []string{"nft", "legacy"} {
		for _, f := range files {
			raw, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			for fam, rules := range splitFamilies(string(raw)) {
				// The sets first: a restore matching a missing set fails.
				// This also has ipset check the members' spelling.
				if sets := setLines(string(raw), fam); sets != "" {
					if _, err := topo.ExecInput(t.Context(), topo.Node(0).NS, strings.NewReader(sets), "ipset", "restore", "-exist"); err != nil {
						t.Errorf("%s ipset restore: %v", filepath.Base(filepath.Dir(f)), err)
					}
				}
				bin := map[string]string{"IPv4": "iptables", "IPv6": "ip6tables"}[fam] + "-" + fl + "-restore"
				if _, err := topo.ExecInput(t.Context(), topo.Node(0).NS, strings.NewReader(rules), bin, "-w", "--noflush"); err != nil {
					t.Errorf("%s %s: %v", filepath.Base(filepath.Dir(f)), bin, err)
				}
			}
		}
	}
}

// splitFamilies cuts a golden file at its "# family X" lines, dropping
// comments.
func splitFamilies(s string) map[string]string {
	out := map[string]string{}
	cur := ""
	for _, l := range strings.Split(s, "\n") {
		if f, ok := strings.CutPrefix(l, "# family "); ok {
			cur = f
			continue
		}
		if cur == "" || strings.HasPrefix(l, "#") || l == "" {
			continue
		}
		out[cur] += l + "\n"
	}
	return out
}

// setLines returns the "# ipset " lines of one family of a golden file as
// ipset restore input.
func setLines(s, family string) string {
	var out strings.Builder
	cur := ""
	for _, l := range strings.Split(s, "\n") {
		if f, ok := strings.CutPrefix(l, "# family "); ok {
			cur = f
			continue
		}
		if rest, ok := strings.CutPrefix(l, "# ipset "); ok && cur == family {
			out.WriteString(rest + "\n")
		}
	}
	return out.String()
}
