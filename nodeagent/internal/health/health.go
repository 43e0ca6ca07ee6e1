package health

import (
	"encoding/json"
	"net/http"
	"sync"
	"time"

	"k8s.io/utils/clock"
)

// Tracker tracks queued and completed syncs.
type Tracker struct {
	clock    clock.PassiveClock
	timeout  time.Duration
	nodeName string

	mu            sync.Mutex
	lastUpdated   time.Time
	oldestPending time.Time
	// lastDriftRepair is when a drift of the kernel from the applied
	// state was last repaired; zero if never.
	lastDriftRepair time.Time
	driftRepairs    int
}

// NewTracker returns a Tracker; timeout is the longest time an update may
// stay queued while the agent is healthy.
func NewTracker(clk clock.PassiveClock, nodeName string, timeout time.Duration) *Tracker {
	return &Tracker{clock: clk, timeout: timeout, nodeName: nodeName}
}

// QueuedUpdate records that an update waits to be applied.
func (t *Tracker) QueuedUpdate() {
	if t == nil {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.oldestPending.IsZero() {
		t.oldestPending = t.clock.Now()
	}
}

// Updated records a successful sync: nothing is pending any more.
func (t *Tracker) Updated() {
	if t == nil {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	t.lastUpdated = t.clock.Now()
	t.oldestPending = time.Time{}
}

// DriftRepaired records that a drift check found the kernel changed
// underneath the agent and a full sync repaired it; /healthz reports the
// last one (the sync loop was never late for it, so health is kept).
func (t *Tracker) DriftRepaired(at time.Time) {
	if t == nil {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	t.lastDriftRepair = at
	t.driftRepairs++
}

// Healthy reports whether no update has been queued for longer than the
// timeout.
func (t *Tracker) Healthy() bool {
	ok, _, _ := t.state()
	return ok
}

func (t *Tracker) state() (healthy bool, lastUpdated, now time.Time) {
	t.mu.Lock()
	defer t.mu.Unlock()
	now = t.clock.Now()
	healthy = t.oldestPending.IsZero() || now.Sub(t.oldestPending) < t.timeout
	return healthy, t.lastUpdated, now
}

func (t *Tracker) drift() (last time.Time, n int) {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.lastDriftRepair, t.driftRepairs
}

// Status is the JSON body of /healthz and /livez, as kube-proxy's.
type Status struct {
	LastUpdated string `json:"lastUpdated"`
	CurrentTime string `json:"currentTime"`
	NodeName    string `json:"nodeName,omitempty"`
	NodeHealthy bool   `json:"nodeHealthy"`
	// LastDriftRepair and DriftRepairs: Switchyard's own, absent until a
	// drift check found the kernel changed underneath the agent.
	LastDriftRepair string `json:"lastDriftRepair,omitempty"`
	DriftRepairs    int    `json:"driftRepairs,omitempty"`
}

// ServeHTTP answers /healthz and /livez: 200 when healthy, 503 otherwise.
func (t *Tracker) ServeHTTP(w http.ResponseWriter, _ *http.Request) {
	healthy, last, now := t.state()
	code := http.StatusOK
	if !healthy {
		code = http.StatusServiceUnavailable
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(code)
	st := Status{
		LastUpdated: last.String(),
		CurrentTime: now.String(),
		NodeName:    t.nodeName,
		NodeHealthy: healthy,
	}
	if at, n := t.drift(); n > 0 {
		st.LastDriftRepair, st.DriftRepairs = at.String(), n
	}
	_ = json.NewEncoder(w).Encode(st)
}

// Mux returns a mux serving /healthz and /livez.
func (t *Tracker) Mux() *http.ServeMux {
	mux := http.NewServeMux()
	mux.Handle("/healthz", t)
	mux.Handle("/livez", t)
	return mux
}
