package conntrack

import (
	"context"
	"fmt"

	"github.com/switchyard-proxy/switchyard/dataplane"
)

// Table reads and deletes the UDP conntrack entries of the node's
// namespace, for the reconciler. Netlink is the real one;
// conntracktest.Table is an in-memory fake.
type Table interface {
	// ListUDP returns the UDP entries of family fam.
	ListUDP(ctx context.Context, fam dataplane.Family) ([]Entry, error)
	// DeleteEntries deletes exactly the given entries of fam (matched by
	// their original tuple and reply source; one the kernel dropped
	// meanwhile is no error) and returns how many it deleted.
	DeleteEntries(ctx context.Context, fam dataplane.Family, entries []Entry) (int, error)
}

// Result is one family's reconcile: the stale entries found (each with
// its reason), how many of them were deleted, and how many UDP entries
// were read.
type Result struct {
	Listed  int
	Stale   []Deletion
	Deleted int
}

// ReconcileTable lists fam's UDP entries in t, reads what must be
// forwarded with live (called after the listing, so every endpoint the
// rules had when an entry was read is in it: a snapshot taken before
// could miss one a sync just added, and delete its fresh flows), and
// deletes the stale ones.
func ReconcileTable(ctx context.Context, t Table, fam dataplane.Family, live func() Live) (Result, error) {
	entries, err := t.ListUDP(ctx, fam)
	if err != nil {
		return Result{}, fmt.Errorf("list %s UDP conntrack entries: %w", fam, err)
	}
	res := Result{Listed: len(entries), Stale: Reconcile(entries, live())}
	if len(res.Stale) == 0 {
		return res, nil
	}
	if err := ctx.Err(); err != nil {
		return res, fmt.Errorf("reconcile %s conntrack: %w", fam, err)
	}
	del := make([]Entry, len(res.Stale))
	for i, d := range res.Stale {
		del[i] = d.Entry
	}
	res.Deleted, err = t.DeleteEntries(ctx, fam, del)
	if err != nil {
		return res, fmt.Errorf("delete %d stale %s UDP conntrack entries: %w", len(del), fam, err)
	}
	return res, nil
}
