package userspace

import (
	"net/netip"
	"slices"
	"sync"
	"time"

	"github.com/switchyard-proxy/switchyard/dataplane/serviceport"
)

// balancer picks backends for one frontend: strict round robin, or with
// a hashed algorithm (maglev, source-hash) the backend the control
// plane's table names for the client, the same one every node's table
// names; and with ClientIP affinity the backend a client last used while
// the entry is younger than the timeout (measured from the client's last
// use, as kube-proxy's userspace proxier did). It is safe for concurrent
// use.
type balancer struct {
	now func() time.Time

	mu       sync.Mutex
	backends []netip.AddrPort
	next     int
	// hash, when set, picks by client through a table indexing backends.
	hash      hashing
	affinity  time.Duration
	sticky    map[netip.Addr]stickyEntry
	lastSweep time.Time
}

type stickyEntry struct {
	backend  netip.AddrPort
	lastUsed time.Time
}

// hashing is a frontend's hashed algorithm and the table of its
// backends (serviceport.Table: slots index the backends in order); the
// zero value is none.
type hashing struct {
	alg   serviceport.Algorithm
	table *serviceport.Table
}

func newBalancer(now func() time.Time, backends []netip.AddrPort, affinity time.Duration, h hashing) *balancer {
	b := &balancer{now: now, sticky: map[netip.Addr]stickyEntry{}}
	b.update(backends, affinity, h)
	return b
}

// update swaps the backend list. The round-robin position is kept (modulo
// the new length), so an update does not restart the rotation at the first
// backend; affinity entries to removed backends are dropped.
func (b *balancer) update(backends []netip.AddrPort, affinity time.Duration, h hashing) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.backends = slices.Clone(backends)
	b.hash = h
	if len(b.backends) > 0 {
		b.next %= len(b.backends)
	} else {
		b.next = 0
	}
	if affinity != b.affinity {
		clear(b.sticky)
	}
	b.affinity = affinity
	for c, e := range b.sticky {
		if !slices.Contains(b.backends, e.backend) {
			delete(b.sticky, c)
		}
	}
}

// pick returns the order in which to try backends for client: the sticky
// backend, the table's (hashed), or the next in rotation first, then every
// other backend once, in rotation order, for retries. The rotation
// advances by one per round-robin pick, so the first choices of
// successive picks are exactly round robin.
func (b *balancer) pick(clientPort netip.AddrPort) []netip.AddrPort {
	client := clientPort.Addr()
	b.mu.Lock()
	defer b.mu.Unlock()
	n := len(b.backends)
	if n == 0 {
		return nil
	}
	if b.affinity > 0 {
		now := b.now()
		b.sweep(now)
		if e, ok := b.sticky[client]; ok && now.Sub(e.lastUsed) < b.affinity {
			if i := slices.Index(b.backends, e.backend); i >= 0 {
				e.lastUsed = now
				b.sticky[client] = e
				return rotate(b.backends, i)
			}
		}
	}
	var i int
	if b.hash.table != nil {
		i = b.hash.table.Pick(b.hash.alg, clientPort)
	} else {
		i = b.next
		b.next = (b.next + 1) % n
	}
	if b.affinity > 0 {
		// Recorded now, not after the connect, so that concurrent
		// connections of one client land together; used and failed
		// correct it after a retry.
		b.sticky[client] = stickyEntry{backend: b.backends[i], lastUsed: b.now()}
	}
	return rotate(b.backends, i)
}

// used records that client is served by backend (after a successful
// connect, possibly a retry), so affinity sticks to the backend that
// works.
func (b *balancer) used(client netip.Addr, backend netip.AddrPort) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.affinity > 0 && slices.Contains(b.backends, backend) {
		b.sticky[client] = stickyEntry{backend: backend, lastUsed: b.now()}
	}
}

// failed forgets client's affinity to a backend that did not answer.
func (b *balancer) failed(client netip.Addr, backend netip.AddrPort) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if e, ok := b.sticky[client]; ok && e.backend == backend {
		delete(b.sticky, client)
	}
}

// sweep drops expired affinity entries, at most once per timeout, so the
// table stays bounded by the clients of one timeout window.
func (b *balancer) sweep(now time.Time) {
	if now.Sub(b.lastSweep) < min(b.affinity, defaultAffinitySweepTime) {
		return
	}
	b.lastSweep = now
	for c, e := range b.sticky {
		if now.Sub(e.lastUsed) >= b.affinity {
			delete(b.sticky, c)
		}
	}
}

// rotate returns s starting at index i, wrapping around.
func rotate(s []netip.AddrPort, i int) []netip.AddrPort {
	out := make([]netip.AddrPort, 0, len(s))
	out = append(out, s[i:]...)
	return append(out, s[:i]...)
}
