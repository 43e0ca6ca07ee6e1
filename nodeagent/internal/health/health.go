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
	// datapath is what the datapath probe found last; nil until it
	// reported (never, with the canary off).
	datapath *DatapathStatus
	// reportChanged holds one signal of a changed datapath verdict or a
	// drift repair.
	reportChanged chan struct{}
}

// DatapathStatus is what the datapath probe (package canary) found.
type DatapathStatus struct {
	// Healthy is false once the probe failed often enough in a row.
	Healthy bool
	// LastProbe is when the probe last ran; zero if it never could.
	LastProbe time.Time
	// Err says why the last probe failed, or why it could not run.
	Err string
}

// NewTracker returns a Tracker; timeout is the longest time an update may
// stay queued while the agent is healthy.
func NewTracker(clk clock.PassiveClock, nodeName string, timeout time.Duration) *Tracker {
	return &Tracker{clock: clk, timeout: timeout, nodeName: nodeName, reportChanged: make(chan struct{}, 1)}
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
	t.signal()
}

// SetDatapath records what the datapath probe found; from then on
// Healthy also requires st.Healthy.
func (t *Tracker) SetDatapath(st DatapathStatus) {
	if t == nil {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	changed := t.datapath == nil || t.datapath.Healthy != st.Healthy
	t.datapath = &st
	if changed {
		t.signal()
	}
}

// signal notes a change the control plane should hear of; t.mu is held.
func (t *Tracker) signal() {
	select {
	case t.reportChanged <- struct{}{}:
	default: // one pending signal is enough: the reader reads the newest
	}
}

// ReportChanged receives a value after the datapath verdict changed (the
// first one included) or a drift was repaired: the agent reports it to
// the control plane without waiting for its next ACK.
func (t *Tracker) ReportChanged() <-chan struct{} { return t.reportChanged }

// Datapath returns what the datapath probe reported last; false when it
// never did.
func (t *Tracker) Datapath() (DatapathStatus, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.datapath == nil {
		return DatapathStatus{}, false
	}
	return *t.datapath, true
}

// Healthy reports whether no update has been queued for longer than the
// timeout and the datapath probe, if it reported, passes: what /healthz
// and the load-balancer health-check node ports answer.
func (t *Tracker) Healthy() bool {
	s := t.snapshot()
	return s.synced && s.datapathOK()
}

// snapshot is the tracker's state at one instant.
type snapshot struct {
	// synced: no update queued for longer than the timeout.
	synced      bool
	lastUpdated time.Time
	now         time.Time
	datapath    *DatapathStatus
}

func (s snapshot) datapathOK() bool { return s.datapath == nil || s.datapath.Healthy }

func (t *Tracker) snapshot() snapshot {
	t.mu.Lock()
	defer t.mu.Unlock()
	now := t.clock.Now()
	s := snapshot{lastUpdated: t.lastUpdated, now: now,
		synced: t.oldestPending.IsZero() || now.Sub(t.oldestPending) < t.timeout}
	if t.datapath != nil {
		d := *t.datapath
		s.datapath = &d
	}
	return s
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
	// DatapathHealthy, LastDatapathProbe and DatapathError: Switchyard's
	// own, absent until the datapath probe reported (package canary).
	DatapathHealthy   *bool  `json:"datapathHealthy,omitempty"`
	LastDatapathProbe string `json:"lastDatapathProbe,omitempty"`
	DatapathError     string `json:"datapathError,omitempty"`
}

// ServeHTTP answers /healthz: 200 when healthy (Healthy), 503 otherwise.
func (t *Tracker) ServeHTTP(w http.ResponseWriter, _ *http.Request) {
	s := t.snapshot()
	t.serve(w, s, s.synced && s.datapathOK())
}

// serveLive answers /livez: the sync loop only, since a restart cannot
// repair a datapath broken underneath the agent.
func (t *Tracker) serveLive(w http.ResponseWriter, _ *http.Request) {
	s := t.snapshot()
	t.serve(w, s, s.synced)
}

func (t *Tracker) serve(w http.ResponseWriter, s snapshot, healthy bool) {
	code := http.StatusOK
	if !healthy {
		code = http.StatusServiceUnavailable
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(code)
	st := Status{
		LastUpdated: s.lastUpdated.String(),
		CurrentTime: s.now.String(),
		NodeName:    t.nodeName,
		NodeHealthy: healthy,
	}
	if at, n := t.drift(); n > 0 {
		st.LastDriftRepair, st.DriftRepairs = at.String(), n
	}
	if d := s.datapath; d != nil {
		ok := d.Healthy
		st.DatapathHealthy, st.DatapathError = &ok, d.Err
		if !d.LastProbe.IsZero() {
			st.LastDatapathProbe = d.LastProbe.String()
		}
	}
	_ = json.NewEncoder(w).Encode(st)
}

// Mux returns a mux serving /healthz and /livez.
func (t *Tracker) Mux() http.Handler {
	mux := http.NewServeMux()
	mux.Handle("/healthz", t)
	mux.HandleFunc("/livez", t.serveLive)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set(AgentHeader, "1")
		mux.ServeHTTP(w, r)
	})
}

// AgentHeader marks the agent's health answers, which otherwise are
// kube-proxy's: on the same port, a probe tells the two apart by it
// (package peer).
const AgentHeader = "X-Switchyard-Agent"
