package probe

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"net"
	"os"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/switchyard-proxy/switchyard/e2e/testbed/echo"
)

// Reason classifies a failed attempt.
type Reason string

// Failure reasons.
const (
	ReasonTimeout     Reason = "timeout"
	ReasonRefused     Reason = "refused"
	ReasonReset       Reason = "reset"
	ReasonUnreachable Reason = "unreachable"
	ReasonBadReply    Reason = "bad-reply" // closed without, or with a malformed, reply
	ReasonError       Reason = "error"
)

// errBadReply marks attempts whose answer could not be parsed.
var errBadReply = errors.New("no valid reply")

// Failure is one failed attempt.
type Failure struct {
	Attempt int           // 0-based attempt number
	At      time.Duration // when the attempt ended, since the run started
	Reason  Reason
	Err     error
}

func (f Failure) String() string {
	return fmt.Sprintf("#%d at %v: %s: %v", f.Attempt, f.At.Round(time.Millisecond), f.Reason, f.Err)
}

// Result is the outcome of a run.
type Result struct {
	Attempts int
	// Counts maps backend name to successful attempts it answered.
	Counts map[string]int
	// Clients maps client IP, as reported by backends with ReportClient, to
	// the number of replies that reported it.
	Clients  map[string]int
	Failures []Failure // ordered by attempt
	// Skipped counts stream ticks where MaxInFlight attempts were running.
	Skipped int
	Elapsed time.Duration
}

// Succeeded returns the number of attempts that got a reply.
func (r Result) Succeeded() int {
	n := 0
	for _, c := range r.Counts {
		n += c
	}
	return n
}

// Reasons counts failures by reason.
func (r Result) Reasons() map[Reason]int {
	out := map[Reason]int{}
	for _, f := range r.Failures {
		out[f.Reason]++
	}
	return out
}

// String summarises the result on one line.
func (r Result) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "attempts=%d ok=%d", r.Attempts, r.Succeeded())
	for _, name := range slices.Sorted(maps.Keys(r.Counts)) {
		fmt.Fprintf(&b, " %s=%d", name, r.Counts[name])
	}
	if len(r.Failures) > 0 {
		fmt.Fprintf(&b, " failed=%d %v first=[%s]", len(r.Failures), r.Reasons(), r.Failures[0])
	}
	if r.Skipped > 0 {
		fmt.Fprintf(&b, " skipped=%d", r.Skipped)
	}
	fmt.Fprintf(&b, " elapsed=%v", r.Elapsed.Round(time.Millisecond))
	return b.String()
}

// Classify returns the Reason for an attempt error.
func Classify(err error) Reason {
	var ne net.Error
	switch {
	case errors.Is(err, syscall.ECONNREFUSED):
		return ReasonRefused
	case errors.Is(err, syscall.ECONNRESET), errors.Is(err, syscall.EPIPE):
		return ReasonReset
	case errors.Is(err, syscall.EHOSTUNREACH), errors.Is(err, syscall.ENETUNREACH):
		return ReasonUnreachable
	case errors.Is(err, os.ErrDeadlineExceeded), errors.Is(err, context.DeadlineExceeded),
		errors.As(err, &ne) && ne.Timeout():
		return ReasonTimeout
	case errors.Is(err, errBadReply), errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
		return ReasonBadReply
	}
	return ReasonError
}

// recorder accumulates attempts from concurrent goroutines.
type recorder struct {
	mu    sync.Mutex
	start time.Time
	res   Result
}

func newRecorder() *recorder {
	return &recorder{start: time.Now(), res: Result{Counts: map[string]int{}, Clients: map[string]int{}}}
}

func (r *recorder) add(attempt int, reply []byte, err error) {
	at := time.Since(r.start)
	var name, client string
	if err == nil {
		var perr error
		if name, client, perr = echo.ParseReply(reply); perr != nil {
			err = fmt.Errorf("%w: %w", errBadReply, perr)
		}
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.res.Attempts++
	if err != nil {
		r.res.Failures = append(r.res.Failures, Failure{Attempt: attempt, At: at, Reason: Classify(err), Err: err})
		return
	}
	r.res.Counts[name]++
	if client != "" {
		if host, _, serr := net.SplitHostPort(client); serr == nil {
			client = host
		}
		r.res.Clients[client]++
	}
}

func (r *recorder) skip() {
	r.mu.Lock()
	r.res.Skipped++
	r.mu.Unlock()
}

func (r *recorder) result() Result {
	r.mu.Lock()
	defer r.mu.Unlock()
	res := r.res
	res.Failures = slices.Clone(res.Failures)
	slices.SortFunc(res.Failures, func(a, b Failure) int { return a.Attempt - b.Attempt })
	res.Counts = maps.Clone(res.Counts)
	res.Clients = maps.Clone(res.Clients)
	res.Elapsed = time.Since(r.start)
	return res
}
