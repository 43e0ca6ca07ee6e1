package conformance

import (
	"flag"
	"os"
	"path/filepath"
	"regexp"
	"testing"

	"github.com/google/go-cmp/cmp"
)

var update = flag.Bool("update", false, "rewrite testdata/markdown/CONFORMANCE.md")

// TestMarkdown renders two small results files (kube-proxy passing what
// Switchyard fails, a skip both share, a spec only one run selected) and
// compares with the golden file.
func TestMarkdown(t *testing.T) {
	dir := filepath.Join("testdata", "markdown")
	runs, err := ReadDir(filepath.Join(dir, "results"), []string{"switchyard-nftables", "kube-proxy-iptables"})
	if err != nil {
		t.Fatal(err)
	}
	got := Markdown(runs, MarkdownOptions{
		Command: "switchyard-conformance -markdown-only",
		RunCommand: func(r Results) string {
			return "switchyard-conformance -proxies " + r.Proxy + " -focus '" + r.Focus + "'"
		},
		Notes: []string{"A note."},
	})
	golden := filepath.Join(dir, "CONFORMANCE.md")
	if *update {
		if err := os.WriteFile(golden, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatalf("%v (run with -update to create it)", err)
	}
	if diff := cmp.Diff(string(want), got); diff != "" {
		t.Errorf("Markdown (-want +got):\n%s", diff)
	}
}

func TestMarkdownEmpty(t *testing.T) {
	got := Markdown(nil, MarkdownOptions{})
	if want := "# Conformance: upstream e2e.test on the real-cluster bed\n\n" +
		"Generated from `conformance/results/*.json`; do not edit by hand.\n\nNo results yet.\n"; got != want {
		t.Errorf("Markdown(nil) = %q, want %q", got, want)
	}
}

// TestExplanationsCompile: every rule is a valid regexp (Explain compiles
// them lazily and would panic in make conformance otherwise).
func TestExplanationsCompile(t *testing.T) {
	for _, e := range Explanations() {
		for _, re := range []string{e.Proxy, e.Spec} {
			if _, err := regexp.Compile(re); err != nil {
				t.Errorf("explanation %q: %v", e.Why, err)
			}
		}
	}
	if got := Explain([]Explanation{{Proxy: "^switchyard-", Spec: "hairpin", Why: "w"}})("switchyard-iptables", "x hairpin y"); got != "w" {
		t.Errorf("Explain = %q, want w", got)
	}
	if got := Explain([]Explanation{{Proxy: "^switchyard-", Spec: "hairpin", Why: "w"}})("kube-proxy-iptables", "x hairpin y"); got != "" {
		t.Errorf("Explain for another proxy = %q, want none", got)
	}
}
