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

// Status is the JSON body of /healthz and /livez, as kube-proxy's.
type Status struct {
	LastUpdated string `json:"lastUpdated"`
	CurrentTime string `json:"currentTime"`
	NodeName    string `json:"nodeName,omitempty"`
	NodeHealthy bool   `json:"nodeHealthy"`
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
	_ = json.NewEncoder(w).Encode(Status{
		LastUpdated: last.String(),
		CurrentTime: now.String(),
		NodeName:    t.nodeName,
		NodeHealthy: healthy,
	})
}

// Mux returns a mux serving /healthz and /livez.
func (t *Tracker) Mux() *http.ServeMux {
	mux := http.NewServeMux()
	mux.Handle("/healthz", t)
	mux.Handle("/livez", t)
	return mux
}
