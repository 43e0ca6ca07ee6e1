package dataplanetest

import (
	"context"
	"fmt"
	"strings"
	"sync"

	"github.com/switchyard-proxy/switchyard/dataplane"
	"github.com/switchyard-proxy/switchyard/dataplane/internal/sorted"
)

var _ dataplane.Dataplane = (*Fake)(nil)

// Call is one recorded Apply or Cleanup.
type Call struct {
	// Op is OpApply or OpCleanup.
	Op string
	// State is the state passed to Apply; nil for Cleanup.
	State *dataplane.State
	// Opts are the options passed to Apply.
	Opts dataplane.ApplyOptions
	// Err is what the call returned.
	Err error
}

// Fake is an in-memory dataplane. The zero value is not usable; use New.
type Fake struct {
	mode string

	mu      sync.Mutex
	calls   []Call
	applied *dataplane.State
	hook    func(op string, st *dataplane.State, opts dataplane.ApplyOptions) error
}

// New returns a Fake that reports mode as its Mode.
func New(mode string) *Fake {
	return &Fake{mode: mode}
}

// Mode implements dataplane.Dataplane.
func (f *Fake) Mode() string { return f.mode }

// SetHook installs fn, called before every Apply (OpApply) and Cleanup
// (OpCleanup); a non-nil error fails the call without changing the applied
// state. nil removes the hook.
func (f *Fake) SetHook(fn func(op string, st *dataplane.State, opts dataplane.ApplyOptions) error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.hook = fn
}

// Apply implements dataplane.Dataplane.
func (f *Fake) Apply(ctx context.Context, st *dataplane.State, opts dataplane.ApplyOptions) error {
	return f.call(ctx, OpApply, st, opts)
}

// Cleanup implements dataplane.Dataplane.
func (f *Fake) Cleanup(ctx context.Context) error {
	return f.call(ctx, OpCleanup, nil, dataplane.ApplyOptions{})
}

// call records one Apply or Cleanup (op) and, unless the hook fails it,
// makes st (nil for a Cleanup) the applied state.
func (f *Fake) call(ctx context.Context, op string, st *dataplane.State, opts dataplane.ApplyOptions) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("fake %s: %w", op, err)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	var err error
	if f.hook != nil {
		err = f.hook(op, st, opts)
	}
	f.calls = append(f.calls, Call{Op: op, State: st, Opts: opts, Err: err})
	if err != nil {
		return fmt.Errorf("fake %s: %w", op, err)
	}
	f.applied = st
	return nil
}

// Calls returns a copy of every call so far, oldest first.
func (f *Fake) Calls() []Call {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]Call(nil), f.calls...)
}

// Cleanups counts the Cleanup calls so far.
func (f *Fake) Cleanups() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	n := 0
	for _, c := range f.calls {
		if c.Op == OpCleanup {
			n++
		}
	}
	return n
}

// Applied returns the last successfully applied state, nil when none (or
// after a Cleanup).
func (f *Fake) Applied() *dataplane.State {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.applied
}

// Services returns the sorted "name@serviceName" keys of the applied state,
// a compact thing to compare in tests.
func (f *Fake) Services() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.applied == nil {
		return nil
	}
	return sorted.Keys(f.applied.Services)
}

// Dump prints the applied state as sorted lines: one per service with its
// cluster IPs and endpoint counts.
func (f *Fake) Dump() string {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.applied == nil {
		return ""
	}
	names := sorted.Keys(f.applied.Services)
	var b strings.Builder
	for _, name := range names {
		sv := f.applied.Services[name]
		fmt.Fprintf(&b, "%s ips=%s cluster=%d local=%d\n", name,
			strings.Join(sv.GetClusterIps(), ","), len(sv.GetClusterEndpoints()), len(sv.GetLocalEndpoints()))
	}
	return b.String()
}
