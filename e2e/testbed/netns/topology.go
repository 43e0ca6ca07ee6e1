package netns

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"sync"
	"time"

	"github.com/vishvananda/netns"
)

// runDir is where `ip netns add` bind-mounts named namespaces.
const runDir = "/run/netns"

// ErrClosed is returned (wrapped) by operations on a closed Topology.
var ErrClosed = errors.New("topology is closed")

// Options tune Create. The zero value is valid.
type Options struct {
	// Logger receives progress and child-process output (default: discard).
	Logger *slog.Logger
	// ID fixes the topology id (default NewID()).
	ID string
}

// Topology is a set of network namespaces built from a Plan. Its methods are
// safe for concurrent use. Close (or the t.Cleanup registered by New) tears it
// down.
type Topology struct {
	plan  Plan
	log   *slog.Logger
	guard *HostGuard

	mu      sync.Mutex
	created []string          // names passed to `ip netns add`, in order
	members map[string]member // verified namespaces, by name
	procs   map[*Process]struct{}
	closed  bool
}

// member is a namespace the topology created and verified.
type member struct {
	path string
	id   nsID
}

// Create builds the topology described by spec. On failure everything built
// so far is torn down.
func Create(ctx context.Context, spec Spec, opts Options) (*Topology, error) {
	start := time.Now()
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	id := opts.ID
	if id == "" {
		var err error
		if id, err = NewID(); err != nil {
			return nil, err
		}
	}
	plan, err := NewPlan(spec, id)
	if err != nil {
		return nil, err
	}
	guard, err := NewHostGuard()
	if err != nil {
		return nil, err
	}
	t := &Topology{
		plan: plan, log: log.With("topology", id), guard: guard,
		members: map[string]member{}, procs: map[*Process]struct{}{},
	}
	if len(guard.Unverified) > 0 {
		t.log.Debug("host guard without PID 1's namespace; relying on process, init_net and fresh-namespace checks",
			"unreadable", guard.Unverified)
	}
	if err := t.build(ctx); err != nil {
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
		defer cancel()
		return nil, errors.Join(fmt.Errorf("build topology %s: %w", id, err), t.Close(cctx))
	}
	t.log.Info("topology ready", "namespaces", len(t.created), "elapsed", time.Since(start).Round(time.Millisecond))
	return t, nil
}

// Plan returns the resolved plan. Treat it as read-only.
func (t *Topology) Plan() Plan { return t.plan }

// ID returns the topology id embedded in every namespace name.
func (t *Topology) ID() string { return t.plan.ID }

// Nodes returns the nodes in index order.
func (t *Topology) Nodes() []Node { return t.plan.Nodes }

// Node returns node i.
func (t *Topology) Node(i int) Node { return t.plan.Nodes[i] }

// Pods returns all pods in index order.
func (t *Topology) Pods() []Pod { return t.plan.Pods() }

// Client returns the client namespace.
func (t *Topology) Client() Host { return t.plan.Client }

// Control returns the control-plane namespace.
func (t *Topology) Control() Host { return t.plan.Control }

// Network returns the shared network segment.
func (t *Topology) Network() Network { return t.plan.Network }

// Namespaces returns every namespace name of the topology.
func (t *Topology) Namespaces() []string { return t.plan.Namespaces() }

// Logger returns the topology's logger.
func (t *Topology) Logger() *slog.Logger { return t.log }

// checkMember verifies that ns belongs to the topology, still is the
// namespace that was created, and is not a host namespace.
func (t *Topology) checkMember(ns string) (member, error) {
	t.mu.Lock()
	m, ok := t.members[ns]
	closed := t.closed
	t.mu.Unlock()
	switch {
	case closed:
		return member{}, fmt.Errorf("namespace %q: %w", ns, ErrClosed)
	case !ok:
		return member{}, fmt.Errorf("namespace %q: %w", ns, ErrUnknownNamespace)
	}
	if err := t.guard.CheckPath(m.path); err != nil {
		return member{}, err
	}
	id, err := statNS(m.path)
	if err != nil {
		return member{}, err
	}
	if id != m.id {
		return member{}, fmt.Errorf("namespace %q is now %s, created as %s: %w", ns, id, m.id, ErrUnknownNamespace)
	}
	return m, nil
}

// openMember opens a verified namespace and re-verifies the open descriptor.
func (t *Topology) openMember(ns string) (netns.NsHandle, error) {
	m, err := t.checkMember(ns)
	if err != nil {
		return netns.None(), err
	}
	h, err := netns.GetFromPath(m.path)
	if err != nil {
		return netns.None(), fmt.Errorf("open namespace %s: %w", ns, err)
	}
	id, err := fstatNS(int(h))
	if err == nil && id != m.id {
		err = fmt.Errorf("namespace %q is now %s, created as %s: %w", ns, id, m.id, ErrUnknownNamespace)
	}
	if err == nil {
		err = t.guard.CheckFD(int(h))
	}
	if err != nil {
		h.Close()
		return netns.None(), err
	}
	return h, nil
}

func nsPath(name string) string { return filepath.Join(runDir, name) }
