package nftables

import (
	"fmt"
	"hash/fnv"
	"maps"

	"github.com/switchyard-proxy/switchyard/dataplane"
)

// slotRanges hands each balancing chain (svc-*, local-* without
// affinity) a block of [i·slots, (i+1)·slots) in an endpoint map of its
// protocol (shard i mod 32, see endpointMap). The chain's one rule draws
// "numgen random mod 65536 offset i·65536", and its endpoints are the
// ranges of that block. Shared maps rather than one per service: the
// kernel finds a named set by walking the table's list of sets, so a set
// per service made every element, rule and set operation O(services)
// and a full load of 10,000 services took ~40 s of kernel CPU.
//
// A chain keeps its block while it exists, so an unchanged service's
// rule never changes; blocks of chains that went away are reused. A chain's block is the first free one from a hash of its name;
// a fresh allocator hands them out in render order (services by name),
// which makes Render deterministic.
type slotRanges struct {
	byChain map[string]slotRef
	used    map[dataplane.Protocol]map[uint32]bool // protocol → blocks in use
}

type slotRef struct {
	proto dataplane.Protocol
	block uint32
}

// maxBlocks keeps the last block's end (2^32 - 65536) representable.
const maxBlocks = 65535

func newSlotRanges() *slotRanges {
	return &slotRanges{byChain: map[string]slotRef{}, used: map[dataplane.Protocol]map[uint32]bool{}}
}

// block returns chain's block in the map of proto, allocating one.
func (a *slotRanges) block(proto dataplane.Protocol, chain string) (uint32, error) {
	if r, ok := a.byChain[chain]; ok && r.proto == proto {
		return r.block, nil
	}
	used := a.used[proto]
	if used == nil {
		used = map[uint32]bool{}
		a.used[proto] = used
	}
	// Probing from a hash of the name, not from 0, makes a chain's block
	// independent of history unless blocks collide: a fresh render of a
	// state then matches an incremental one (and tests can compare them).
	h := fnv.New32a()
	h.Write([]byte(chain))
	start := h.Sum32() % maxBlocks
	for i := uint32(0); i < maxBlocks; i++ {
		b := (start + i) % maxBlocks
		if !used[b] {
			used[b] = true
			a.byChain[chain] = slotRef{proto, b}
			return b, nil
		}
	}
	return 0, fmt.Errorf("more than %d load-balanced %s service ports", maxBlocks, proto)
}

// release frees the block of a chain that went away.
func (a *slotRanges) release(chain string) {
	if r, ok := a.byChain[chain]; ok {
		delete(a.byChain, chain)
		delete(a.used[r.proto], r.block)
	}
}

// keep frees the blocks of chains for which live is false.
func (a *slotRanges) keep(live func(chain string) bool) {
	for chain := range a.byChain {
		if !live(chain) {
			a.release(chain)
		}
	}
}

func (a *slotRanges) clone() *slotRanges {
	c := &slotRanges{byChain: maps.Clone(a.byChain), used: map[dataplane.Protocol]map[uint32]bool{}}
	for p, u := range a.used {
		c.used[p] = maps.Clone(u)
	}
	return c
}
