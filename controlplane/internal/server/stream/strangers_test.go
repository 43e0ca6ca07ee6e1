package stream

import (
	"context"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

type countingObserver struct{ open, refused int }

func (o *countingObserver) StrangerStreams(open int) { o.open = open }
func (o *countingObserver) StrangerRefused()         { o.refused++ }

func TestStrangersAdmit(t *testing.T) {
	known := func(n string) bool { return n == "node-a" }
	for _, tc := range []struct {
		name  string
		max   int
		order []string // names opened in order, none released
		want  []codes.Code
	}{
		{"known nodes never count", 1, []string{"x", "node-a", "node-a", "y"}, []codes.Code{codes.OK, codes.OK, codes.OK, codes.ResourceExhausted}},
		{"bound of two", 2, []string{"x", "y", "z"}, []codes.Code{codes.OK, codes.OK, codes.ResourceExhausted}},
		{"negative refuses every stranger", -1, []string{"x", "node-a"}, []codes.Code{codes.ResourceExhausted, codes.OK}},
		{"zero is the default", 0, make([]string, DefaultMaxStrangers+1), append(make([]codes.Code, DefaultMaxStrangers), codes.ResourceExhausted)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			obs := &countingObserver{}
			s := &Strangers{Known: known, Max: tc.max, Observer: obs}
			var refused int
			for i, n := range tc.order {
				_, err := s.Admit(t.Context(), nil, n)
				if got := status.Code(err); got != tc.want[i] {
					t.Fatalf("stream %d (%q): %v, want %v", i, n, err, tc.want[i])
				}
				if err != nil {
					refused++
				}
			}
			if obs.refused != refused {
				t.Errorf("observer counted %d refusals, want %d", obs.refused, refused)
			}
		})
	}
}

// TestStrangersRelease: a slot is freed once, however often release runs.
func TestStrangersRelease(t *testing.T) {
	obs := &countingObserver{}
	s := &Strangers{Known: func(string) bool { return false }, Max: 1, Observer: obs}
	release, err := s.Admit(t.Context(), nil, "x")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Admit(t.Context(), nil, "y"); status.Code(err) != codes.ResourceExhausted {
		t.Fatalf("second stranger: %v, want ResourceExhausted", err)
	}
	release()
	release()
	if obs.open != 0 {
		t.Errorf("open after release = %d, want 0", obs.open)
	}
	r1, err := s.Admit(t.Context(), nil, "y")
	if err != nil {
		t.Fatalf("after release: %v", err)
	}
	defer r1()
	if _, err := s.Admit(t.Context(), nil, "z"); status.Code(err) != codes.ResourceExhausted {
		t.Errorf("a double release freed two slots: %v", err)
	}
}

// TestStrangersWaitForReady: before the first views every node is unknown,
// so streams wait rather than take (or be refused) a slot.
func TestStrangersWaitForReady(t *testing.T) {
	ready := make(chan struct{})
	views := map[string]bool{}
	s := &Strangers{Known: func(n string) bool { return views[n] }, Ready: ready, Max: -1}

	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Millisecond)
	defer cancel()
	if _, err := s.Admit(ctx, nil, "node-a"); status.Code(err) != codes.DeadlineExceeded {
		t.Errorf("before ready: %v, want to wait until the deadline", err)
	}
	closing := make(chan struct{})
	close(closing)
	if _, err := s.Admit(t.Context(), closing, "node-a"); status.Code(err) != codes.Unavailable {
		t.Errorf("shutting down before ready: %v, want Unavailable", err)
	}

	done := make(chan error, 1)
	go func() {
		_, err := s.Admit(t.Context(), nil, "node-a")
		done <- err
	}()
	views["node-a"] = true // published before Ready closes
	close(ready)
	if err := <-done; err != nil {
		t.Errorf("node-a after ready: %v, want admitted", err)
	}
}
