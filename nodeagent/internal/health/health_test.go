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
