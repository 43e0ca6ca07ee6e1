package syncer

import (
	"fmt"
	"time"
)

// Pacing is how the syncer spaces syncs that follow each other.
type Pacing int

const (
	// PacingBounded is kube-proxy's bounded frequency: a sync starts no
	// sooner than MinSyncPeriod after the previous one ended, however
	// little that one cost. A pod that turns Ready within MinSyncPeriod
	// of its not-ready add (usually: its first probe) waits it out.
	PacingBounded Pacing = iota
	// PacingAdaptive spaces syncs by what they cost: a sync starts
	// adaptiveFactor times the previous sync's duration after it ended,
	// never later than MinSyncPeriod. An idle node applies a change at
	// once; a burst is coalesced into syncs that use at most
	// 1/(1+adaptiveFactor) of a core; a mode whose syncs are slow (an
	// iptables restore of 10k services) is paced as PacingBounded.
	PacingAdaptive
)

// adaptiveFactor is the adaptive pacing's gap after a sync, in units of
// that sync's duration: syncing back to back under sustained churn takes
// at most a fifth of a core.
const adaptiveFactor = 4

// ParsePacing reads a pacing by its flag name.
func ParsePacing(s string) (Pacing, error) {
	switch s {
	case "bounded":
		return PacingBounded, nil
	case "adaptive":
		return PacingAdaptive, nil
	}
	return 0, fmt.Errorf("sync pacing %q: want adaptive or bounded", s)
}

func (p Pacing) String() string {
	if p == PacingAdaptive {
		return "adaptive"
	}
	return "bounded"
}

// gap is the time a sync waits for after the previous one ended, which
// took cost, under pacing p with the minimum sync period minSync.
func (p Pacing) gap(minSync, cost time.Duration) time.Duration {
	if p == PacingAdaptive {
		return min(minSync, adaptiveFactor*cost)
	}
	return minSync
}
