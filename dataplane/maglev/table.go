package maglev

import (
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
)

// Errors New returns, wrapped with the offending input; test with errors.Is.
var (
	// ErrNoBackends: a table needs at least one backend. A port without
	// endpoints is decided elsewhere (reject or drop), not by a table.
	ErrNoBackends = errors.New("maglev: no backends")
	// ErrBadBackend: an empty or repeated endpoint identity. A repeat is a
	// bug upstream; silently merging it would hide that.
	ErrBadBackend = errors.New("maglev: bad backend")
	// ErrBadSize: the size is not a prime in [len(backends), MaxSize].
	ErrBadSize = errors.New("maglev: bad table size")
)

// Seed is the cluster's jhash seed: every table a control plane computes
// carries it, so every node hashes a flow alike. A constant rather than a
// setting: changing it moves almost every flow of every hashed service,
// and nothing gains from choosing it. Changing it is a wire-format change.
const Seed = 0x5317c4a5

// Table is a Maglev lookup table: Slots[i] is the index in Backends of the
// backend that owns slot i. A flow whose hash scales to slot i goes to
// Backends[Slots[i]].
//
// Backends is sorted and has no repeats, so the same set of endpoints
// yields the same Table whatever order the caller listed them in. Slot
// values fit in uint16 because len(Backends) <= len(Slots) <= MaxSize.
type Table struct {
	Backends []string
	Slots    []uint16
}

// New builds the Maglev table of the given size (a prime, see Size) for
// backends, in any order. It is pure and deterministic: the permutation of
// each backend depends only on its name and the size (see permutation), so
// every node and every control-plane replica computes the same table.
func New(backends []string, size int) (Table, error) {
	if len(backends) == 0 {
		return Table{}, ErrNoBackends
	}
	sorted := slices.Clone(backends)
	slices.Sort(sorted)
	for i, b := range sorted {
		if b == "" {
			return Table{}, fmt.Errorf("%w: empty identity", ErrBadBackend)
		}
		if i > 0 && sorted[i-1] == b {
			return Table{}, fmt.Errorf("%w: %q listed twice", ErrBadBackend, b)
		}
	}
	if size < len(sorted) || size > MaxSize || !isPrime(size) {
		return Table{}, fmt.Errorf("%w: %d for %d backends (want a prime in [%d, %d])",
			ErrBadSize, size, len(sorted), len(sorted), MaxSize)
	}
	return Table{Backends: sorted, Slots: populate(sorted, size)}, nil
}

// populate is the fill loop of the Maglev paper (Eisenbud et al., NSDI'16,
// section 3.4): backends take turns, each claiming the next free slot of its
// own permutation of [0, size). Every turn claims exactly one slot, so when
// the table is full every backend owns floor(size/n) or ceil(size/n) slots;
// the extra slots of the last, partial round go to the first backends in
// sorted order. A backend's preferences do not depend on the other
// backends, which is why removing one mostly frees only its own slots.
func populate(backends []string, size int) []uint16 {
	m := uint64(size)
	pos := make([]uint64, len(backends))  // next candidate slot per backend
	skip := make([]uint64, len(backends)) // permutation stride per backend
	for i, b := range backends {
		pos[i], skip[i] = permutation(b, m)
	}
	const free = ^uint16(0) // > MaxSize, never a backend index
	slots := make([]uint16, size)
	for i := range slots {
		slots[i] = free
	}
	for filled := 0; ; {
		for i := range backends {
			// size is prime and 1 <= skip < size, so pos walks all
			// slots before repeating: a free one is always found.
			for slots[pos[i]] != free {
				pos[i] = (pos[i] + skip[i]) % m
			}
			slots[pos[i]] = uint16(i)
			pos[i] = (pos[i] + skip[i]) % m
			if filled++; filled == size {
				return slots
			}
		}
	}
}

// permutation returns a backend's offset in [0, m) and skip in [1, m-1]
// from SHA-256 of its identity: the first eight bytes (big endian) for the
// offset, the next eight for the skip. SHA-256 rather than Go's map hash
// or hash/maphash because those are seeded per process; rather than
// FNV because both values come from one well-mixed digest. Changing this
// function changes every table in the cluster, which moves almost every
// flow once: treat it as a wire-format change.
func permutation(backend string, m uint64) (offset, skip uint64) {
	sum := sha256.Sum256([]byte(backend))
	offset = binary.BigEndian.Uint64(sum[0:8]) % m
	skip = binary.BigEndian.Uint64(sum[8:16])%(m-1) + 1
	return offset, skip
}

// Backend returns the backend owning slot, which must be in [0, len(Slots)).
func (t Table) Backend(slot uint32) string {
	return t.Backends[t.Slots[slot]]
}

// Lookup returns the backend nftables picks for a flow whose hashed bytes
// are key (FlowKey or AddrKey) under seed: the same arithmetic as the rule
// `jhash <expr> mod len(Slots) seed <seed>` indexing a map of this table.
func (t Table) Lookup(key []byte, seed uint32) string {
	return t.Backend(JHashMod(key, seed, uint32(len(t.Slots))))
}

// Shares returns how many slots each backend owns, indexed like Backends.
func (t Table) Shares() []int {
	n := make([]int, len(t.Backends))
	for _, s := range t.Slots {
		n[s]++
	}
	return n
}
