package cache

import (
	"slices"
	"sync"

	"k8s.io/utils/clock"
)

// Cache holds the newest NodeView of every node, the one watch (stream) per
// node and what each node's agent acknowledged. Safe for concurrent use.
type Cache struct {
	clock   clock.PassiveClock
	applied ApplyObserver // nil: none

	// mu guards the nodes map. A node's fields are guarded by node.mu; the
	// lock order is mu, then node.mu. Paths that change a node hold at
	// least mu.RLock so Remove cannot orphan it concurrently.
	mu    sync.RWMutex
	nodes map[string]*node
}

// node is one node's entry.
type node struct {
	name string

	mu    sync.Mutex
	view  NodeView // nil: the control plane does not know this node (yet)
	watch *Watch   // nil: no stream
	ack   ackState
	// gen is the ApplyObserver's Generation when view was published.
	gen uint64
}

// Option configures a Cache.
type Option func(*Cache)

// WithClock sets the clock used for connection, ACK and NACK times.
func WithClock(c clock.PassiveClock) Option {
	return func(cc *Cache) { cc.clock = c }
}

// WithApplyObserver sets who learns, at each ACK, what the agent's view
// newly holds at its desired version (the fleet's programming latency).
func WithApplyObserver(o ApplyObserver) Option {
	return func(cc *Cache) { cc.applied = o }
}

// New returns an empty cache.
func New(opts ...Option) *Cache {
	c := &Cache{clock: clock.RealClock{}, nodes: make(map[string]*node)}
	for _, o := range opts {
		o(c)
	}
	return c
}

// Publish makes nv the newest view of node. changed names the resources that
// may differ from the previously published view (added, updated or removed);
// nil means unknown, and the node's stream diffs everything. Publish never
// blocks on a stream. A nil nv is Remove.
func (c *Cache) Publish(name string, nv NodeView, changed []string) {
	if nv == nil {
		c.Remove(name)
		return
	}
	n := c.lockNode(name)
	defer c.mu.RUnlock()
	defer n.mu.Unlock()

	prev := n.view
	n.view = nv
	if c.applied != nil {
		n.gen = c.applied.Generation()
	}
	if w := n.watch; w != nil {
		if changed == nil || prev == nil || (len(changed) == 0 && prev.Version() != nv.Version()) {
			w.markAll(n.gen)
		} else {
			w.markNames(changed, nv.Len(), n.gen)
		}
		w.signal()
	}
}

// Remove forgets node's view, e.g. when the Node object is deleted. A node
// with a connected agent stays listed (unknown, with no desired version)
// until the agent disconnects; the stream sends nothing until a view is
// published again.
func (c *Cache) Remove(name string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	n, ok := c.nodes[name]
	if !ok {
		return
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	n.view = nil
	if n.watch == nil {
		delete(c.nodes, name)
		return
	}
	n.watch.markAll(0)
	n.watch.signal()
}

// View returns node's newest view.
func (c *Cache) View(name string) (NodeView, bool) {
	c.mu.RLock()
	n, ok := c.nodes[name]
	c.mu.RUnlock()
	if !ok {
		return nil, false
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.view, n.view != nil
}

// lockNode returns name's node, created when missing, with c.mu read-locked
// and n.mu locked. The caller unlocks both.
func (c *Cache) lockNode(name string) *node {
	for {
		c.mu.RLock()
		if n, ok := c.nodes[name]; ok {
			n.mu.Lock()
			return n
		}
		c.mu.RUnlock()

		c.mu.Lock()
		if _, ok := c.nodes[name]; !ok {
			c.nodes[name] = &node{name: name}
		}
		c.mu.Unlock()
		// A Remove between the two locks deletes the new, empty node;
		// the next round creates it again.
	}
}

// Snapshot returns every node's status, newest view and acknowledged view,
// sorted by name.
func (c *Cache) Snapshot() []NodeSnapshot {
	c.mu.RLock()
	nodes := make([]*node, 0, len(c.nodes))
	for _, n := range c.nodes {
		nodes = append(nodes, n)
	}
	c.mu.RUnlock()
	slices.SortFunc(nodes, func(a, b *node) int {
		switch {
		case a.name < b.name:
			return -1
		case a.name > b.name:
			return 1
		}
		return 0
	})
	out := make([]NodeSnapshot, 0, len(nodes))
	for _, n := range nodes {
		out = append(out, n.snapshot())
	}
	return out
}

// Node returns one node's snapshot.
func (c *Cache) Node(name string) (NodeSnapshot, bool) {
	c.mu.RLock()
	n, ok := c.nodes[name]
	c.mu.RUnlock()
	if !ok {
		return NodeSnapshot{}, false
	}
	return n.snapshot(), true
}
