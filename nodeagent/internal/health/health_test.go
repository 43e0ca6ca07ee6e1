package health

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	clocktesting "k8s.io/utils/clock/testing"
)

func TestHealthz(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	tests := []struct {
		name  string
		steps func(tr *Tracker, clk *clocktesting.FakeClock)
		code  int
	}{
		{"nothing queued", func(*Tracker, *clocktesting.FakeClock) {}, http.StatusOK},
		{"queued within timeout", func(tr *Tracker, clk *clocktesting.FakeClock) {
			tr.QueuedUpdate()
			clk.Step(9 * time.Second)
		}, http.StatusOK},
		{"queued past timeout", func(tr *Tracker, clk *clocktesting.FakeClock) {
			tr.QueuedUpdate()
			clk.Step(5 * time.Second)
			tr.QueuedUpdate() // the oldest pending update counts
			clk.Step(5 * time.Second)
		}, http.StatusServiceUnavailable},
		{"updated after queue", func(tr *Tracker, clk *clocktesting.FakeClock) {
			tr.QueuedUpdate()
			clk.Step(11 * time.Second)
			tr.Updated()
		}, http.StatusOK},
		{"no update for long but nothing queued", func(tr *Tracker, clk *clocktesting.FakeClock) {
			tr.Updated()
			clk.Step(time.Hour)
		}, http.StatusOK},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			clk := clocktesting.NewFakeClock(t0)
			tr := NewTracker(clk, "node-a", 10*time.Second)
			tt.steps(tr, clk)
			for _, path := range []string{"/healthz", "/livez"} {
				rec := httptest.NewRecorder()
				tr.Mux().ServeHTTP(rec, httptest.NewRequest("GET", path, nil))
				if rec.Code != tt.code {
					t.Errorf("%s code = %d, want %d", path, rec.Code, tt.code)
				}
				var st Status
				if err := json.Unmarshal(rec.Body.Bytes(), &st); err != nil {
					t.Fatalf("%s body %q: %v", path, rec.Body.String(), err)
				}
				if st.NodeName != "node-a" || st.NodeHealthy != (tt.code == http.StatusOK) || st.CurrentTime != clk.Now().String() {
					t.Errorf("%s body = %+v", path, st)
				}
			}
		})
	}
}

// TestDatapath: /healthz (and Healthy, which the health-check node ports
// ask) is 503 while the datapath probe fails; /livez ignores it, since a
// restart repairs nothing broken underneath the agent; the body says why.
func TestDatapath(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	probed := t0.Add(time.Second)
	tests := []struct {
		name      string
		status    *DatapathStatus
		queued    bool
		healthz   int
		livez     int
		wantField bool
	}{
		{"never probed", nil, false, http.StatusOK, http.StatusOK, false},
		{"probe passes", &DatapathStatus{Healthy: true, LastProbe: probed}, false, http.StatusOK, http.StatusOK, true},
		{"probe fails", &DatapathStatus{Healthy: false, LastProbe: probed, Err: "connect: timeout"}, false,
			http.StatusServiceUnavailable, http.StatusOK, true},
		{"probe passes, sync late", &DatapathStatus{Healthy: true, LastProbe: probed}, true,
			http.StatusServiceUnavailable, http.StatusServiceUnavailable, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			clk := clocktesting.NewFakeClock(t0)
			tr := NewTracker(clk, "node-a", 10*time.Second)
			if tt.queued {
				tr.QueuedUpdate()
				clk.Step(11 * time.Second)
			}
			if tt.status != nil {
				tr.SetDatapath(*tt.status)
			}
			if got, want := tr.Healthy(), tt.healthz == http.StatusOK; got != want {
				t.Errorf("Healthy = %t, want %t", got, want)
			}
			for path, code := range map[string]int{"/healthz": tt.healthz, "/livez": tt.livez} {
				rec := httptest.NewRecorder()
				tr.Mux().ServeHTTP(rec, httptest.NewRequest("GET", path, nil))
				if rec.Code != code {
					t.Errorf("%s code = %d, want %d", path, rec.Code, code)
				}
				var st Status
				if err := json.Unmarshal(rec.Body.Bytes(), &st); err != nil {
					t.Fatalf("%s body %q: %v", path, rec.Body.String(), err)
				}
				if st.NodeHealthy != (code == http.StatusOK) {
					t.Errorf("%s nodeHealthy = %t with code %d", path, st.NodeHealthy, code)
				}
				if !tt.wantField {
					if st.DatapathHealthy != nil || st.LastDatapathProbe != "" {
						t.Errorf("%s body has datapath fields before any probe: %s", path, rec.Body.String())
					}
					continue
				}
				if st.DatapathHealthy == nil || *st.DatapathHealthy != tt.status.Healthy ||
					st.LastDatapathProbe != probed.String() || st.DatapathError != tt.status.Err {
					t.Errorf("%s body = %s, want datapath %+v", path, rec.Body.String(), *tt.status)
				}
			}
		})
	}
}
