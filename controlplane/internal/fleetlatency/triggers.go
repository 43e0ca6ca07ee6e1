package fleetlatency

import (
	"slices"
	"time"
)

// Trigger is what one update's change to one service carries for
// network programming latency.
type Trigger struct {
	// Times are the last-change-trigger-time annotations of the service's
	// EndpointSlices the update added or updated, one per slice (as
	// kube-proxy observes one per slice). Empty for a Service-only change
	// and for an update that deleted one of the service's slices.
	Times []time.Time
	// Nodes are the only nodes whose view of the service the change
	// reached (a Local policy's per-node views); nil: every node.
	Nodes []string
}

// maxChanges bounds the changes kept per service. A node more than
// maxChanges changes of one service behind (a stream stuck for that long)
// observes the newest maxChanges only: its oldest, largest latencies are
// lost rather than memory grown per service without bound.
const maxChanges = 16

// change is one recorded change of a service: its generation, its trigger
// times (sorted, oldest first) and the nodes it reached (nil: every node).
type change struct {
	gen   uint64
	times []time.Time
	nodes []string
}

// record keeps the usable times of tr in e under generation gen; the
// caller holds t.mu for writing.
func (t *Tracker) record(e *entry, gen uint64, tr Trigger, now time.Time) {
	var times []time.Time
	for _, at := range tr.Times {
		// kube-proxy's rule: a trigger before this process started is the
		// age of an old change (the first views are no change), and one
		// in the future is a bad clock or a bad annotation; neither is a
		// latency.
		if at.IsZero() || at.Before(t.start) || at.After(now) {
			continue
		}
		times = append(times, at)
	}
	if len(times) == 0 {
		return
	}
	slices.SortFunc(times, func(a, b time.Time) int { return a.Compare(b) })
	var nodes []string
	if tr.Nodes != nil {
		nodes = slices.Sorted(slices.Values(tr.Nodes))
	}
	if len(e.changes) == maxChanges {
		e.changes = slices.Delete(e.changes, 0, 1)
	}
	e.changes = append(e.changes, change{gen: gen, times: times, nodes: nodes})
}

// Triggers returns, oldest first, the trigger times of name's changes
// published in generations since..until (both included) that reached
// node: what a view taken at generation until brings a node whose
// previous view was taken before since. It returns nil when since is 0
// (the changes' start is unknown: a stream's first batch, or a cache
// with no generations).
func (t *Tracker) Triggers(name string, since, until uint64, node string) []time.Time {
	if since == 0 || since > until {
		return nil
	}
	t.mu.RLock()
	defer t.mu.RUnlock()
	e, ok := t.services[name]
	if !ok {
		return nil
	}
	var out []time.Time
	for _, c := range e.changes {
		if c.gen < since || c.gen > until {
			continue
		}
		if c.nodes != nil {
			if _, ok := slices.BinarySearch(c.nodes, node); !ok {
				continue
			}
		}
		out = append(out, c.times...)
	}
	if len(out) > 1 {
		slices.SortFunc(out, func(a, b time.Time) int { return a.Compare(b) })
	}
	return out
}
