package drain

import (
	"log/slog"
	"time"
)

// DefaultMax is IPVS's default TCP established timeout (900 s): a
// connection idle that long has gone from IPVS's table anyway, so waiting
// longer would only wait for connections still in use.
const DefaultMax = 15 * time.Minute

// Bound is one piece of state's drain.
type Bound struct {
	// What names the state in logs ("the ipvs mode", "kube-proxy's
	// IPVS state").
	What string
	// Max bounds the drain; 0 means DefaultMax.
	Max time.Duration
	// Now reads the clock; time.Now when nil.
	Now func() time.Time
	// Log gets the drain's lines; nil discards.
	Log *slog.Logger

	since time.Time
}

// Keep reports whether the state stays for the conns (> 0) connections
// it carries: true until Max has passed since the drain started (this
// call starts it when none is under way); false ends the drain.
func (b *Bound) Keep(conns int) bool {
	now := b.now()
	if b.since.IsZero() {
		b.since = now
		b.log().Info("keeping "+b.What+" until its connections drain: new connections take the rules in use",
			"connections", conns, "maxDrain", b.max())
		return true
	}
	if now.Sub(b.since) < b.max() {
		return true
	}
	b.log().Warn("drain bound reached: removing "+b.What+" breaks its remaining connections",
		"connections", conns, "drainedFor", now.Sub(b.since).Round(time.Second))
	b.since = time.Time{}
	return false
}

// End ends a drain under way because the state carries no connection
// any more (or is gone).
func (b *Bound) End() {
	if b.since.IsZero() {
		return
	}
	b.log().Info("connections of "+b.What+" drained: removing it", "drainedFor", b.now().Sub(b.since).Round(time.Second))
	b.since = time.Time{}
}

func (b *Bound) now() time.Time {
	if b.Now == nil {
		return time.Now()
	}
	return b.Now()
}

func (b *Bound) max() time.Duration {
	if b.Max <= 0 {
		return DefaultMax
	}
	return b.Max
}

func (b *Bound) log() *slog.Logger {
	if b.Log == nil {
		return slog.New(slog.DiscardHandler)
	}
	return b.Log
}
