package ipvs

import (
	"context"
	"strings"

	"github.com/switchyard-proxy/switchyard/dataplane/internal/sorted"
	"github.com/switchyard-proxy/switchyard/dataplane/ipset"
)

// Sets are driven through package ipset (`ipset save`, and `ipset restore
// -exist`: one process per change, however many members), as kube-proxy
// does. What is this mode's: which sets are ours (isOwnedSet), that they
// are fixed (created once, destroyed only by Cleanup), and the order of
// their changes against the rules and virtual servers (sync).

// readSets reads back our sets.
func (d *Dataplane) readSets(ctx context.Context) (map[string]*ipset.Set, error) {
	return ipset.Save(ctx, d.cfg.Runner, isOwnedSet)
}

// planSets returns the restore inputs that bring have's sets to want's:
// pre creates missing sets and adds missing members, post deletes the
// members the state no longer wants. Sets themselves stay: they are
// fixed (Cleanup destroys them). A set of ours whose type differs is an
// error: it cannot be changed while rules refer to it; Cleanup removes it.
func planSets(have, want map[string]*ipset.Set) (pre, post string, err error) {
	var a, r strings.Builder
	for _, n := range sorted.Keys(want) {
		w, h := want[n], have[n]
		var members map[string]bool
		if h != nil {
			if err := w.Check(h.Spec); err != nil {
				return "", "", err
			}
			members = h.Members
		}
		c := ipset.Diff(w.Spec, members, w.Members, h == nil)
		a.WriteString(c.Pre)
		r.WriteString(c.Post)
	}
	return a.String(), r.String(), nil
}

func (d *Dataplane) ipsetRestore(ctx context.Context, payload string) error {
	return ipset.Restore(ctx, d.cfg.Runner, payload, &d.stats.IPSetRestores)
}
