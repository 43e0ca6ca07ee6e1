package apistatus

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
)

// DefaultRetryInterval is how often a List or Watch of an unreachable API
// server is repeated.
const DefaultRetryInterval = 500 * time.Millisecond

// State is one resource's watch state.
type State int

const (
	// Pending: registered, no call has completed yet.
	Pending State = iota
	// Available: the last call was answered.
	Available
	// Unavailable: the last call failed, since Status.Since.
	Unavailable
)

func (s State) String() string {
	switch s {
	case Available:
		return "available"
	case Unavailable:
		return "unavailable"
	}
	return "pending"
}

// Status is one resource's state as Snapshot reports it.
type Status struct {
	// Resource is the informer's resource, e.g. "endpointslices".
	Resource string
	State    State
	// Since is when the resource became unavailable (zero otherwise).
	Since time.Time
	// LastError is the newest failure's message while unavailable.
	LastError string
	// Errors counts failed List and Watch calls since start.
	Errors uint64
}

// Options configures a Tracker.
type Options struct {
	// RetryInterval defaults to DefaultRetryInterval.
	RetryInterval time.Duration
	Logger        *slog.Logger
	// Now defaults to time.Now (tests).
	Now func() time.Time
}

// Tracker holds every registered resource's state. Its methods are safe
// for concurrent use.
type Tracker struct {
	retry time.Duration
	log   *slog.Logger
	now   func() time.Time

	mu     sync.Mutex
	res    map[string]*Status
	outage time.Time // start of the current outage; zero when none
}

// New returns a Tracker with no resources.
func New(o Options) *Tracker {
	if o.RetryInterval <= 0 {
		o.RetryInterval = DefaultRetryInterval
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	return &Tracker{retry: o.RetryInterval, log: o.Logger, now: o.Now, res: map[string]*Status{}}
}

// Register adds resource in state Pending; Wrap registers too.
func (t *Tracker) Register(resource string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if _, ok := t.res[resource]; !ok {
		t.res[resource] = &Status{Resource: resource}
	}
}

// Snapshot returns every resource's status, sorted by resource.
func (t *Tracker) Snapshot() []Status {
	t.mu.Lock()
	defer t.mu.Unlock()
	out := make([]Status, 0, len(t.res))
	for _, s := range t.res {
		out = append(out, *s)
	}
	slices.SortFunc(out, func(a, b Status) int { return strings.Compare(a.Resource, b.Resource) })
	return out
}

// Outage returns when the current outage began: when a resource became
// unavailable while none was; zero when no resource is unavailable. Views
// published during an outage may be stale.
func (t *Tracker) Outage() time.Time {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.outage
}

// Elapsed is the time since ts on the tracker's clock.
func (t *Tracker) Elapsed(ts time.Time) time.Duration { return t.now().Sub(ts) }

// verdict is what a call's error means.
type verdict int

const (
	answered    verdict = iota // success, or an answer that is not an outage
	unreachable                // retry here at the fixed interval
	refused                    // unavailable, but the reflector backs off
)

// classify sorts a List or Watch error. Context errors are answered: they
// come from the caller stopping, not from the server.
func classify(err error) verdict {
	if err == nil || errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return answered
	}
	var st apierrors.APIStatus
	if !errors.As(err, &st) {
		return unreachable // transport: refused, reset, TLS, DNS, timeout
	}
	switch st.Status().Code {
	case http.StatusTooManyRequests, http.StatusBadGateway, http.StatusServiceUnavailable, http.StatusGatewayTimeout:
		return unreachable
	case http.StatusUnauthorized, http.StatusForbidden:
		return refused
	}
	return answered
}

// observe records one call's outcome and returns its verdict.
func (t *Tracker) observe(resource, op string, err error) verdict {
	v := classify(err)
	t.mu.Lock()
	defer t.mu.Unlock()
	s, ok := t.res[resource]
	if !ok {
		s = &Status{Resource: resource}
		t.res[resource] = s
	}
	now := t.now()
	if v == answered {
		if s.State != Available {
			s.State, s.Since, s.LastError = Available, time.Time{}, ""
			t.endOutageLocked(now)
		}
		return v
	}
	s.Errors++
	s.LastError = err.Error()
	if s.State != Unavailable {
		s.State, s.Since = Unavailable, now
		if t.outage.IsZero() {
			t.outage = now
			t.log.Warn("Kubernetes API unreachable: views are not updated until it returns, agents keep the rules they have",
				"resource", resource, "op", op, "err", err)
		} else {
			t.log.Debug("Kubernetes API unreachable for another resource", "resource", resource, "op", op, "err", err)
		}
	}
	return v
}

// endOutageLocked ends the outage once no resource is unavailable.
func (t *Tracker) endOutageLocked(now time.Time) {
	if t.outage.IsZero() {
		return
	}
	for _, s := range t.res {
		if s.State == Unavailable {
			return
		}
	}
	t.log.Info("Kubernetes API reachable again", "outage", now.Sub(t.outage).Round(time.Millisecond))
	t.outage = time.Time{}
}

// wait sleeps one retry interval; false when ctx ended first.
func (t *Tracker) wait(ctx context.Context) bool {
	tm := time.NewTimer(t.retry)
	defer tm.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-tm.C:
		return true
	}
}
