package nftables

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/switchyard-proxy/switchyard/e2e/dataplane/dptest"
	"github.com/switchyard-proxy/switchyard/e2e/testbed/netns"
)

// TestGoldenTablesAcceptedByKernel loads every golden table of
// dataplane/nftables (a knftables Fake dump, which is nft -f input) into
// a fresh node namespace, so the goldens are known to be valid nft input
// for this kernel and nft version.
func TestGoldenTablesAcceptedByKernel(t *testing.T) {
	files, err := filepath.Glob("../../../dataplane/nftables/testdata/*/want.nft")
	if err != nil || len(files) == 0 {
		t.Fatalf("no golden files: %v", err)
	}
	topo := netns.New(t, netns.Spec{Nodes: 1})
	r := dptest.NewRunner(topo, topo.Node(0).NS, runnerOptions)
	for _, f := range files {
		raw, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		var lines []string
		for _, l := range strings.Split(string(raw), "\n") {
			if l != "" && !strings.HasPrefix(l, "#") {
				lines = append(lines, l)
			}
		}
		name := filepath.Base(filepath.Dir(f))
		input := strings.Join(lines, "\n") + "\ndelete table ip switchyard\n"
		if strings.Contains(input, "table ip6 ") {
			input += "delete table ip6 switchyard\n"
		}
		if _, err := r.Run(t.Context(), []string{"nft", "-f", "-"}, []byte(input)); err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}
}
