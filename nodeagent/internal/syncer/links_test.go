package syncer

import (
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	switchyardv1 "github.com/switchyard-proxy/switchyard/proto/switchyard/v1"
)

// TestLinksChangedSyncs: every sync's state carries Config.Links' names,
// and LinksChanged brings a partial sync with the new ones at once, the
// view unchanged, when the nftables mode has a flowtable to keep in step;
// otherwise the node's interfaces (every pod's veth) cost no sync.
func TestLinksChangedSyncs(t *testing.T) {
	nft := switchyardv1.DataplaneMode_DATAPLANE_MODE_NFTABLES
	for _, tc := range []struct {
		name       string
		flowtable  []string
		wantSynced bool
	}{
		{"flowtable configured", []string{"veth*"}, true},
		{"no flowtable", nil, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var mu sync.Mutex
			names := []string{"eth0", "lo"}
			h := newHarness(t, nil, false, func(_ *harness, c *Config) {
				c.Links = func() []string { mu.Lock(); defer mu.Unlock(); return slices.Clone(names) }
			})
			cfg := nodeConfig(nft)
			cfg.GetNodeConfig().FlowtableInterfaces = tc.flowtable
			if _, err := h.s.Apply(t.Context(), update("s1", cfg, svc("ns/a", "1"))); err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff([]string{"eth0", "lo"}, h.dp(nft).Applied().Links); diff != "" {
				t.Errorf("links of the first sync (-want +got):\n%s", diff)
			}
			mu.Lock()
			names = []string{"eth0", "lo", "veth1"}
			mu.Unlock()
			h.s.LinksChanged()
			want := []string{"DATAPLANE_MODE_NFTABLES apply full=true"}
			if !tc.wantSynced {
				time.Sleep(50 * time.Millisecond) // the fake clock does not move: no sync may come
				h.wantCalls(t, want)
				return
			}
			want = append(want, "DATAPLANE_MODE_NFTABLES apply full=false")
			h.waitFor("a sync with the new links", func() bool { return len(h.calls()) == 2 })
			h.wantCalls(t, want)
			if diff := cmp.Diff([]string{"eth0", "lo", "veth1"}, h.dp(nft).Applied().Links); diff != "" {
				t.Errorf("links after LinksChanged (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff([]string{"ns/a"}, h.dp(nft).Services()); diff != "" {
				t.Errorf("services (-want +got):\n%s", diff)
			}
		})
	}
}
