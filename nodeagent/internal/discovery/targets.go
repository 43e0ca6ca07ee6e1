package discovery

import (
	"hash/fnv"
	"slices"
	"sync"
)

// target is one address of the dial list.
type target struct {
	addr string
	// learnt is true for an address learnt from the control plane that is
	// not also configured: it is dialled with Config.LearntDialOptions.
	learnt bool
}

// targets is the dial list: the learnt addresses, rotated by a hash of the
// node's name so that agents spread over the replicas, then the configured
// addresses not already in it. Run's goroutine changes it; Targets reads
// it from any goroutine.
type targets struct {
	node       string
	configured []string

	mu     sync.Mutex
	learnt []string // as the control plane sent them, deduplicated
	list   []target
}

func newTargets(node string, configured, learnt []string) *targets {
	t := &targets{node: node, configured: dedupe(configured)}
	t.learnt = dedupe(learnt)
	t.rebuild()
	return t
}

// dedupe returns s without empty strings and later duplicates, in order.
func dedupe(s []string) []string {
	var out []string
	for _, a := range s {
		if a != "" && !slices.Contains(out, a) {
			out = append(out, a)
		}
	}
	return out
}

// rebuild derives list from learnt and configured; t.mu is held or t is
// not shared yet.
func (t *targets) rebuild() {
	t.list = nil
	if n := len(t.learnt); n > 0 {
		h := fnv.New32a()
		_, _ = h.Write([]byte(t.node))
		off := int(h.Sum32() % uint32(n))
		for i := range n {
			a := t.learnt[(off+i)%n]
			t.list = append(t.list, target{addr: a, learnt: !slices.Contains(t.configured, a)})
		}
	}
	for _, a := range t.configured {
		if !slices.Contains(t.learnt, a) {
			t.list = append(t.list, target{addr: a})
		}
	}
}

// next returns the address to dial after prev: the one after it in the
// list, or the first when prev is empty or no longer listed.
func (t *targets) next(prev string) target {
	t.mu.Lock()
	defer t.mu.Unlock()
	i := slices.IndexFunc(t.list, func(x target) bool { return x.addr == prev })
	return t.list[(i+1)%len(t.list)]
}

// restart returns the address to dial after a stream to prev that worked
// has ended (its replica stopped): the list from the top again, prev
// skipped, so that the other replicas the control plane advertised come
// before the configured addresses. next, which walks on from prev, is
// for an attempt that failed: after the last learnt address it would go
// through every configured one first, some of which may not answer (a
// node listed that runs no replica: a dial timeout each).
func (t *targets) restart(prev string) target {
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, x := range t.list {
		if x.addr != prev {
			return x
		}
	}
	return t.list[0]
}

// learn replaces the learnt addresses and reports whether they changed. An
// empty list changes nothing: the control plane sends one when it has
// nothing to advertise, which says nothing about the replicas.
func (t *targets) learn(addrs []string) bool {
	addrs = dedupe(addrs)
	t.mu.Lock()
	defer t.mu.Unlock()
	if len(addrs) == 0 || slices.Equal(addrs, t.learnt) {
		return false
	}
	t.learnt = addrs
	t.rebuild()
	return true
}

// addrs returns the dial list's addresses in order.
func (t *targets) addrs() []string {
	t.mu.Lock()
	defer t.mu.Unlock()
	out := make([]string, len(t.list))
	for i, x := range t.list {
		out[i] = x.addr
	}
	return out
}
