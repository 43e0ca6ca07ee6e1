package syncer

import (
	"slices"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestLinksChangedSyncs: every sync's state carries Config.Links' names,
// and LinksChanged brings a partial sync with the new ones at once, the
// view unchanged.
func TestLinksChangedSyncs(t *testing.T) {
	var mu sync.Mutex
	names := []string{"eth0", "lo"}
	h := newHarness(t, nil, false, func(_ *harness, c *Config) {
		c.Links = func() []string { mu.Lock(); defer mu.Unlock(); return slices.Clone(names) }
	})
	if _, err := h.s.Apply(t.Context(), update("s1", svc("ns/a", "1"))); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"eth0", "lo"}, h.dp(dry).Applied().Links); diff != "" {
		t.Errorf("links of the first sync (-want +got):\n%s", diff)
	}
	mu.Lock()
	names = []string{"eth0", "lo", "veth1"}
	mu.Unlock()
	h.s.LinksChanged()
	h.waitFor("a sync with the new links", func() bool { return len(h.calls()) == 2 })
	h.wantCalls(t, []string{"DATAPLANE_MODE_DRY_RUN apply full=true", "DATAPLANE_MODE_DRY_RUN apply full=false"})
	if diff := cmp.Diff([]string{"eth0", "lo", "veth1"}, h.dp(dry).Applied().Links); diff != "" {
		t.Errorf("links after LinksChanged (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"ns/a"}, h.dp(dry).Services()); diff != "" {
		t.Errorf("services (-want +got):\n%s", diff)
	}
}
