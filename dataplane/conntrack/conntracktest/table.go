package conntracktest

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"

	"github.com/switchyard-proxy/switchyard/dataplane"
	"github.com/switchyard-proxy/switchyard/dataplane/conntrack"
)

var _ conntrack.Table = (*Table)(nil)

// Table is a fake conntrack table per family.
type Table struct {
	mu      sync.Mutex
	entries map[dataplane.Family][]conntrack.Entry
	// ListErr and DeleteErr, when set, fail the next calls.
	ListErr, DeleteErr error
	// OnList, when set, runs at each ListUDP (after the listing is
	// taken, without the table's lock): what changes while the kernel
	// is read.
	OnList func()
	// Lists counts ListUDP calls, Deletes DeleteEntries calls; read
	// them with Listed while others may call.
	Lists, Deletes int
}

// Listed returns Lists.
func (t *Table) Listed() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.Lists
}

// New returns an empty table.
func New() *Table { return &Table{entries: map[dataplane.Family][]conntrack.Entry{}} }

// Add inserts entries into fam's table.
func (t *Table) Add(fam dataplane.Family, es ...conntrack.Entry) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.entries[fam] = append(t.entries[fam], es...)
}

// ListUDP implements conntrack.Table.
func (t *Table) ListUDP(_ context.Context, fam dataplane.Family) ([]conntrack.Entry, error) {
	t.mu.Lock()
	t.Lists++
	err, out, on := t.ListErr, slices.Clone(t.entries[fam]), t.OnList
	t.mu.Unlock()
	if on != nil {
		on()
	}
	if err != nil {
		return nil, err
	}
	return out, nil
}

// DeleteEntries implements conntrack.Table.
func (t *Table) DeleteEntries(_ context.Context, fam dataplane.Family, del []conntrack.Entry) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.Deletes++
	if t.DeleteErr != nil {
		return 0, t.DeleteErr
	}
	n := 0
	t.entries[fam] = slices.DeleteFunc(t.entries[fam], func(e conntrack.Entry) bool {
		if slices.Contains(del, e) {
			n++
			return true
		}
		return false
	})
	return n, nil
}

// Dump prints the entries left, one a line, "fam src -> dst via reply",
// sorted.
func (t *Table) Dump() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	var lines []string
	for fam, es := range t.entries {
		for _, e := range es {
			lines = append(lines, fmt.Sprintf("%s %s -> %s via %s", fam, e.Src, e.Dst, e.Reply))
		}
	}
	slices.Sort(lines)
	return strings.Join(lines, "\n")
}
