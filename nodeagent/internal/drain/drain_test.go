package drain_test

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/switchyard-proxy/switchyard/nodeagent/internal/drain"
)

// TestBound walks drains through their ends: connections gone, the bound
// reached, and a drain started again afterwards, with the lines each
// logs.
func TestBound(t *testing.T) {
	type step struct {
		after time.Duration // since the previous step
		conns int           // 0: End
		keep  bool
		logs  string // the line logged, "" for none
	}
	for _, tc := range []struct {
		name  string
		max   time.Duration
		steps []step
	}{
		{"drained before the bound", time.Minute, []step{
			{0, 5, true, "keeping the ipvs mode"},
			{30 * time.Second, 2, true, ""},
			{10 * time.Second, 0, false, "connections of the ipvs mode drained"},
			{time.Second, 0, false, ""},
		}},
		{"bound reached", time.Minute, []step{
			{0, 5, true, "keeping"},
			{59 * time.Second, 5, true, ""},
			{time.Second, 5, false, "drain bound reached"},
			{time.Second, 5, true, "keeping"}, // a new drain
			{time.Minute, 1, false, "drain bound reached"},
		}},
		{"default bound", 0, []step{
			{0, 1, true, "keeping"},
			{drain.DefaultMax - time.Second, 1, true, ""},
			{time.Second, 1, false, "drain bound reached"},
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			now := time.Unix(0, 0)
			var buf bytes.Buffer
			b := &drain.Bound{What: "the ipvs mode", Max: tc.max, Now: func() time.Time { return now },
				Log: slog.New(slog.NewTextHandler(&buf, nil))}
			for i, s := range tc.steps {
				now = now.Add(s.after)
				buf.Reset()
				keep := false
				if s.conns == 0 {
					b.End()
				} else {
					keep = b.Keep(s.conns)
				}
				if keep != s.keep {
					t.Errorf("step %d: keep %v, want %v", i, keep, s.keep)
				}
				if got := buf.String(); s.logs == "" && got != "" || !strings.Contains(got, s.logs) {
					t.Errorf("step %d logged %q, want a line with %q", i, got, s.logs)
				}
			}
		})
	}
}
