package cache

import "iter"

// ApplyObserver learns, at each ACK, which names the acknowledged view
// brought to the node at their desired version; *fleetlatency.Tracker
// implements it.
type ApplyObserver interface {
	// Generation is stamped on each view as Publish takes it.
	Generation() uint64
	// Applied is called at an ACK, under the node's lock, with the stamp
	// of the acknowledged view. names yields each name whose version in
	// the acknowledged view is the node's desired one and differs from
	// the previously acknowledged view's (or is new to it); it must be
	// consumed before Applied returns.
	Applied(gen uint64, names iter.Seq[string])
}

// newlyApplied yields the names among taken (all of acked's when
// taken.All) that acked holds at the version desired holds, at a version
// prev does not hold.
//
// taken covers every name whose version differs between prev and acked:
// a stream takes once per response and keeps one in flight, so the names
// taken since the previous ACK are those the acknowledged response was
// planned from (and, after a NACK, those of the rejected one). Names that
// did not change for the node (Changes' false positives) fall to the
// comparison with prev, so a node counts once per change.
func newlyApplied(prev, acked, desired NodeView, taken Changes) iter.Seq[string] {
	return func(yield func(string) bool) {
		if desired == nil {
			return
		}
		// Equal system versions are equal content: an ACK of the newest
		// view (the usual case) holds every name at its desired version.
		current := desired.Version() == acked.Version()
		check := func(v *View) bool {
			name, version := v.Name, v.Version
			if !current {
				if d, ok := desired.Get(name); !ok || d.Version != version {
					return true // not (or no longer) what the node must have
				}
			}
			if prev != nil {
				if p, ok := prev.Get(name); ok && p.Version == version {
					return true // the node had it already
				}
			}
			return yield(name)
		}
		if taken.All {
			acked.Range(check)
			return
		}
		for _, name := range taken.Names {
			if v, ok := acked.Get(name); ok && !check(v) {
				return
			}
		}
	}
}
