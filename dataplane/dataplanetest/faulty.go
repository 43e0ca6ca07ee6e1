package dataplanetest

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"sync"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/switchyard-proxy/switchyard/dataplane"
	switchyardv1 "github.com/switchyard-proxy/switchyard/proto/switchyard/v1"
)

var _ dataplane.Dataplane = (*Faulty)(nil)

// The operations Faulty records, as Fake names them in Call.Op.
const (
	OpApply   = "apply"
	OpCleanup = "cleanup"
)

// ErrInjected is what every fault Faulty makes up wraps, so a test can
// tell an injected failure from a real one with errors.Is.
var ErrInjected = errors.New("injected fault")

// Kind is what a Fault does to one call.
type Kind int

const (
	// Pass calls the inner dataplane unchanged.
	Pass Kind = iota
	// Fail returns an error without calling the inner dataplane: a
	// commit the kernel refused as a whole (iptables-restore exit 1, an
	// nft transaction rejected), which leaves the kernel as it was.
	Fail
	// Partial hands the inner dataplane the state it last accepted with
	// only some of the changes of this call, then returns an error: a
	// commit that got half-way (IPVS programs one virtual server at a
	// time, a dual-stack sync commits IPv4 before IPv6 fails), so the
	// kernel holds neither the old state nor the new one. On Cleanup the
	// inner Cleanup runs and an error is returned anyway.
	Partial
	// Slow waits (Fault.Delay, then Fault.Release) before calling the
	// inner dataplane, giving up when ctx ends: a kernel held by a lock
	// or a huge ruleset, during which updates keep arriving.
	Slow
)

var kindNames = [...]string{Pass: "pass", Fail: "fail", Partial: "partial", Slow: "slow"}

func (k Kind) String() string {
	if k >= 0 && int(k) < len(kindNames) {
		return kindNames[k]
	}
	return fmt.Sprintf("Kind(%d)", int(k))
}

// Fault is what happens to one call.
type Fault struct {
	Kind Kind
	// Err is returned (wrapped, joined with ErrInjected) by Fail and
	// Partial; ErrInjected alone when nil.
	Err error
	// Changes is how many of the call's changes a Partial Apply lets
	// through, in name order; zero or less means half, rounded down.
	Changes int
	// Delay is how long a Slow call waits, on Faulty's clock.
	Delay time.Duration
	// Release, when set, holds a Slow call (after Delay) until it is
	// closed: the deterministic way for a test to end a slow apply.
	Release <-chan struct{}
}

// Plan picks the fault of each call, in call order; op is OpApply or
// OpCleanup. Faulty calls it with its lock held, so a Plan may keep
// unsynchronised state.
type Plan func(op string) Fault

// Script returns a Plan that gives the n-th call it is asked about
// (Apply and Cleanup counted together, from 0) faults[n], and Pass once
// they are used up: the plan of a test that knows which call must fail.
func Script(faults ...Fault) Plan {
	next := 0
	return func(string) Fault {
		if next >= len(faults) {
			return Fault{}
		}
		next++
		return faults[next-1]
	}
}

// Odds are the probabilities of a Random plan; they should sum to at
// most 1, the rest passes.
type Odds struct {
	Fail, Partial, Slow float64
	// Delay is the wait of a Slow fault.
	Delay time.Duration
}

// Random returns a Plan drawing each call's fault from odds with a
// generator seeded by seed (Cilium's FaultyLBMaps, made repeatable): a
// fuzz-like run that fails is replayed by its seed.
func Random(seed uint64, odds Odds) Plan {
	rng := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	return func(string) Fault {
		r := rng.Float64()
		switch {
		case r < odds.Fail:
			return Fault{Kind: Fail}
		case r < odds.Fail+odds.Partial:
			return Fault{Kind: Partial}
		case r < odds.Fail+odds.Partial+odds.Slow:
			return Fault{Kind: Slow, Delay: odds.Delay}
		}
		return Fault{}
	}
}

// Injection is one fault Faulty injected.
type Injection struct {
	// Call numbers the call among all calls to the Faulty, from 0.
	Call  int
	Op    string
	Fault Fault
	// Changed names, in order, the services whose change reached the
	// inner dataplane in a Partial Apply.
	Changed []string
	// Canceled is set when ctx ended a Slow call before the inner call.
	Canceled bool
	// Err is what the call returned.
	Err error
}

// Faulty wraps a dataplane.Dataplane and injects faults into its calls
// by a Plan, recording each one. It keeps the state the inner dataplane
// last accepted, which is what a half-way commit starts from.
//
// Calls are serialised, as every real mode serialises them.
type Faulty struct {
	inner dataplane.Dataplane
	after func(time.Duration) <-chan time.Time

	// call serialises Apply and Cleanup; held across the inner call.
	call sync.Mutex
	// last is the state the inner dataplane last accepted; nil after a
	// Cleanup and before the first Apply. Guarded by call.
	last *dataplane.State

	mu       sync.Mutex
	plan     Plan
	calls    int
	waiting  int
	injected []Injection
}

// FaultyOption configures a Faulty.
type FaultyOption func(*Faulty)

// WithAfter times Fault.Delay with after (a fake clock's After) instead
// of time.After, so a test steps through delays without sleeping.
func WithAfter(after func(time.Duration) <-chan time.Time) FaultyOption {
	return func(f *Faulty) { f.after = after }
}

// NewFaulty wraps inner; plan may be nil (every call passes).
func NewFaulty(inner dataplane.Dataplane, plan Plan, opts ...FaultyOption) *Faulty {
	f := &Faulty{inner: inner, plan: plan, after: time.After}
	for _, o := range opts {
		o(f)
	}
	return f
}

// SetPlan replaces the plan from the next call on; nil passes every call.
func (f *Faulty) SetPlan(p Plan) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.plan = p
}

// Injections returns a copy of the faults injected so far, oldest first.
func (f *Faulty) Injections() []Injection {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.injected)
}

// Waiting counts the Slow calls waiting right now, so a test can wait
// for a slow apply to be under way before it sends more updates.
func (f *Faulty) Waiting() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.waiting
}

// Mode implements dataplane.Dataplane: the inner mode's.
func (f *Faulty) Mode() string { return f.inner.Mode() }

// Apply implements dataplane.Dataplane.
func (f *Faulty) Apply(ctx context.Context, st *dataplane.State, opts dataplane.ApplyOptions) error {
	f.call.Lock()
	defer f.call.Unlock()
	in := f.next(OpApply)
	err := f.inject(ctx, &in, func() error { return f.apply(ctx, st, opts) }, func() error {
		half, changed := partial(f.last, st, in.Fault.Changes)
		in.Changed = changed
		if err := f.apply(ctx, half, opts); err != nil {
			return fmt.Errorf("faulty apply, partial commit: %w", errors.Join(err, injected(in.Fault)))
		}
		return fmt.Errorf("faulty apply: committed %d of the changes: %w", len(changed), injected(in.Fault))
	})
	f.record(in, err)
	return err
}

// Cleanup implements dataplane.Dataplane.
func (f *Faulty) Cleanup(ctx context.Context) error {
	f.call.Lock()
	defer f.call.Unlock()
	in := f.next(OpCleanup)
	err := f.inject(ctx, &in, func() error { return f.cleanup(ctx) }, func() error {
		return fmt.Errorf("faulty cleanup, after the inner one: %w", errors.Join(f.cleanup(ctx), injected(in.Fault)))
	})
	f.record(in, err)
	return err
}

// inject does in's fault: pass is the inner call, part the half-way one.
func (f *Faulty) inject(ctx context.Context, in *Injection, pass, part func() error) error {
	switch in.Fault.Kind {
	case Fail:
		return fmt.Errorf("faulty %s: %w", in.Op, injected(in.Fault))
	case Partial:
		return part()
	case Slow:
		if err := f.wait(ctx, in.Fault); err != nil {
			in.Canceled = true
			return fmt.Errorf("faulty %s, slow: %w", in.Op, err)
		}
	}
	return pass()
}

// apply is the inner Apply, keeping what it accepted.
func (f *Faulty) apply(ctx context.Context, st *dataplane.State, opts dataplane.ApplyOptions) error {
	if err := f.inner.Apply(ctx, st, opts); err != nil {
		return err
	}
	f.last = st
	return nil
}

// cleanup is the inner Cleanup; nothing is left to build on after it.
func (f *Faulty) cleanup(ctx context.Context) error {
	if err := f.inner.Cleanup(ctx); err != nil {
		return err
	}
	f.last = nil
	return nil
}

// next numbers the call and asks the plan for its fault.
func (f *Faulty) next(op string) Injection {
	f.mu.Lock()
	defer f.mu.Unlock()
	in := Injection{Call: f.calls, Op: op}
	f.calls++
	if f.plan != nil {
		in.Fault = f.plan(op)
	}
	return in
}

func (f *Faulty) record(in Injection, err error) {
	if in.Fault.Kind == Pass {
		return
	}
	in.Err = err
	f.mu.Lock()
	defer f.mu.Unlock()
	f.injected = append(f.injected, in)
}

// wait holds a Slow call for its delay, then until its release, or until
// ctx ends.
func (f *Faulty) wait(ctx context.Context, flt Fault) error {
	f.mu.Lock()
	f.waiting++
	f.mu.Unlock()
	defer func() {
		f.mu.Lock()
		f.waiting--
		f.mu.Unlock()
	}()
	if flt.Delay > 0 {
		select {
		case <-f.after(flt.Delay):
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	if flt.Release != nil {
		select {
		case <-flt.Release:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return nil
}

func injected(flt Fault) error {
	if flt.Err == nil {
		return ErrInjected
	}
	return errors.Join(flt.Err, ErrInjected)
}

// partial returns prev with the first n (half when n <= 0) of the
// changes from prev to next applied, in name order, and the names of
// those changes. A change is a service added, removed or altered; the
// NodeConfig is next's, as a commit programs every service under the
// settings it was rendered with.
func partial(prev, next *dataplane.State, n int) (*dataplane.State, []string) {
	var had map[string]*switchyardv1.ServiceView
	if prev != nil {
		had = prev.Services
	}
	var changes []string
	for name, sv := range next.Services {
		if old, ok := had[name]; !ok || !proto.Equal(old, sv) {
			changes = append(changes, name)
		}
	}
	for name := range had {
		if _, ok := next.Services[name]; !ok {
			changes = append(changes, name)
		}
	}
	slices.Sort(changes)
	if n <= 0 {
		n = len(changes) / 2
	}
	changes = changes[:min(n, len(changes))]
	out := &dataplane.State{Config: next.Config, Services: maps.Clone(had)}
	if out.Services == nil {
		out.Services = map[string]*switchyardv1.ServiceView{}
	}
	for _, name := range changes {
		if sv, ok := next.Services[name]; ok {
			out.Services[name] = sv
		} else {
			delete(out.Services, name)
		}
	}
	return out, changes
}
