package apistatus

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/cache"
)

var gr = schema.GroupResource{Resource: "endpointslices"}

// refusedErr is what a dial to a dead API server returns, wrapped as
// client-go wraps it.
func refusedErr() error {
	return fmt.Errorf("Get \"https://127.0.0.1:6443/apis\": %w",
		&net.OpError{Op: "dial", Net: "tcp", Err: os.NewSyscallError("connect", syscall.ECONNREFUSED)})
}

func TestClassify(t *testing.T) {
	tests := []struct {
		name string
		err  error
		want verdict
	}{
		{"success", nil, answered},
		{"connection refused", refusedErr(), unreachable},
		{"EOF mid-request", errors.New("unexpected EOF"), unreachable},
		{"503 while starting", apierrors.NewServiceUnavailable("etcd not ready"), unreachable},
		{"429", apierrors.NewTooManyRequests("slow down", 1), unreachable},
		{"504", apierrors.NewTimeoutError("gateway", 1), unreachable},
		{"410 too old resource version", apierrors.NewResourceExpired("too old resource version"), answered},
		{"404 not served", apierrors.NewNotFound(gr, ""), answered},
		{"403 RBAC", apierrors.NewForbidden(gr, "", errors.New("no")), refused},
		{"401", apierrors.NewUnauthorized("expired token"), refused},
		{"caller cancelled", context.Canceled, answered},
		{"caller deadline", fmt.Errorf("list: %w", context.DeadlineExceeded), answered},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := classify(tt.err); got != tt.want {
				t.Errorf("classify(%v) = %v, want %v", tt.err, got, tt.want)
			}
		})
	}
}

// scripted is a ListerWatcher whose calls fail with errs in turn, then
// succeed.
type scripted struct {
	errs  []error
	calls int
}

func (s *scripted) next() error {
	s.calls++
	if len(s.errs) == 0 {
		return nil
	}
	err := s.errs[0]
	s.errs = s.errs[1:]
	return err
}

func (s *scripted) List(metav1.ListOptions) (runtime.Object, error) {
	if err := s.next(); err != nil {
		return nil, err
	}
	return &metav1.List{}, nil
}

func (s *scripted) Watch(metav1.ListOptions) (watch.Interface, error) {
	if err := s.next(); err != nil {
		return nil, err
	}
	return watch.NewFake(), nil
}

func newTestTracker(log *bytes.Buffer) *Tracker {
	return New(Options{RetryInterval: time.Millisecond, Logger: slog.New(slog.NewTextHandler(log, nil))})
}

// TestWrapRetriesUnreachable: the reflector sees one call that returns once
// the server answers; the outage is counted, logged once and cleared.
func TestWrapRetriesUnreachable(t *testing.T) {
	var log bytes.Buffer
	tr := newTestTracker(&log)
	inner := &scripted{errs: []error{refusedErr(), refusedErr(), apierrors.NewServiceUnavailable("starting")}}
	lw := tr.Wrap("endpointslices", inner).(cache.ListerWatcherWithContext)
	if st := tr.Snapshot(); len(st) != 1 || st[0].State != Pending {
		t.Fatalf("before any call: %+v, want one pending resource", st)
	}
	w, err := lw.WatchWithContext(t.Context(), metav1.ListOptions{})
	if err != nil || w == nil {
		t.Fatalf("Watch = %v, %v; want the watch once the server answers", w, err)
	}
	if inner.calls != 4 {
		t.Errorf("inner calls = %d, want 4 (3 failures retried, then success)", inner.calls)
	}
	st := tr.Snapshot()[0]
	if st.State != Available || st.Errors != 3 || st.LastError != "" || !st.Since.IsZero() {
		t.Errorf("after recovery: %+v, want available with 3 errors counted", st)
	}
	if !tr.Outage().IsZero() {
		t.Errorf("Outage = %v after recovery, want zero", tr.Outage())
	}
	if n := strings.Count(log.String(), "Kubernetes API unreachable"); n != 1 {
		t.Errorf("outage logged %d times, want once:\n%s", n, log.String())
	}
	if !strings.Contains(log.String(), "Kubernetes API reachable again") {
		t.Errorf("recovery not logged:\n%s", log.String())
	}
}

// TestWrapPassesAnswers: errors that are answers reach the reflector at
// once, which relists (410) or backs off (403).
func TestWrapPassesAnswers(t *testing.T) {
	tests := []struct {
		name  string
		err   error
		state State
	}{
		{"410 gone", apierrors.NewResourceExpired("too old resource version"), Available},
		{"403 forbidden", apierrors.NewForbidden(gr, "", errors.New("rbac")), Unavailable},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var log bytes.Buffer
			tr := newTestTracker(&log)
			inner := &scripted{errs: []error{tt.err}}
			lw := tr.Wrap("services", inner).(cache.ListerWatcherWithContext)
			if _, err := lw.ListWithContext(t.Context(), metav1.ListOptions{}); !errors.Is(err, tt.err) {
				t.Errorf("List error = %v, want %v passed through", err, tt.err)
			}
			if inner.calls != 1 {
				t.Errorf("inner calls = %d, want 1", inner.calls)
			}
			if st := tr.Snapshot()[0]; st.State != tt.state {
				t.Errorf("state = %v, want %v", st.State, tt.state)
			}
		})
	}
}

// TestWrapStopsWithContext: a retry loop against a server that never
// returns ends when the informer stops.
func TestWrapStopsWithContext(t *testing.T) {
	var log bytes.Buffer
	tr := newTestTracker(&log)
	errs := make([]error, 1<<20)
	for i := range errs {
		errs[i] = refusedErr()
	}
	lw := tr.Wrap("nodes", &scripted{errs: errs}).(cache.ListerWatcherWithContext)
	ctx, cancel := context.WithTimeout(t.Context(), 50*time.Millisecond)
	defer cancel()
	if _, err := lw.WatchWithContext(ctx, metav1.ListOptions{}); err == nil {
		t.Fatal("Watch succeeded against a dead server")
	}
	st := tr.Snapshot()[0]
	if st.State != Unavailable || st.Since.IsZero() || !strings.Contains(st.LastError, "connection refused") || st.Errors == 0 {
		t.Errorf("after giving up: %+v, want unavailable since a time, with the dial error", st)
	}
	if tr.Outage() != st.Since {
		t.Errorf("Outage = %v, want %v (the first unavailable resource)", tr.Outage(), st.Since)
	}
}

// TestOutageSpansResources: the outage starts with the first resource
// that fails and ends when the last one is back; one warning for all.
func TestOutageSpansResources(t *testing.T) {
	var log bytes.Buffer
	now := time.Unix(1000, 0)
	tr := New(Options{Logger: slog.New(slog.NewTextHandler(&log, nil)), Now: func() time.Time { return now }})
	tr.observe("services", "watch", refusedErr())
	start := now
	now = now.Add(time.Second)
	tr.observe("nodes", "watch", refusedErr())
	now = now.Add(time.Second)
	tr.observe("services", "watch", nil)
	if got := tr.Outage(); got != start {
		t.Errorf("Outage with nodes still down = %v, want %v", got, start)
	}
	now = now.Add(time.Second)
	tr.observe("nodes", "list", nil)
	if got := tr.Outage(); !got.IsZero() {
		t.Errorf("Outage with everything back = %v, want zero", got)
	}
	if n := strings.Count(log.String(), "level=WARN"); n != 1 {
		t.Errorf("%d warnings, want 1:\n%s", n, log.String())
	}
	if !strings.Contains(log.String(), "outage=3s") {
		t.Errorf("recovery line without the outage's length:\n%s", log.String())
	}
}

// TestWatchListCapabilityKept: the reflector asks the wrapper whether the
// client can stream lists; a fake clientset's "no" must survive wrapping.
func TestWatchListCapabilityKept(t *testing.T) {
	tr := New(Options{})
	lw := tr.Wrap("services", capability{scripted: &scripted{}, unsupported: true})
	if !lw.(interface{ IsWatchListSemanticsUnSupported() bool }).IsWatchListSemanticsUnSupported() {
		t.Error("wrapper lost the client's WatchList answer")
	}
	if tr.Wrap("nodes", &scripted{}).(interface{ IsWatchListSemanticsUnSupported() bool }).IsWatchListSemanticsUnSupported() {
		t.Error("wrapper invented a WatchList answer")
	}
}

type capability struct {
	*scripted
	unsupported bool
}

func (c capability) IsWatchListSemanticsUnSupported() bool { return c.unsupported }
