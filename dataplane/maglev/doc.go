// Package maglev computes Maglev consistent-hashing tables (Eisenbud et
// al., "Maglev: A Fast and Reliable Software Network Load Balancer",
// NSDI'16) and the kernel's jhash, so that a flow lands on the same
// endpoint on every node and few flows move when endpoints change.
//
// # The table
//
// New(backends, size) fills `size` slots with endpoint indexes: each
// endpoint walks its own permutation of the slots (offset and skip from
// SHA-256 of its identity, e.g. "10.244.1.3:8080") and the endpoints take
// turns claiming their next free slot. Size(n) picks the size from the
// endpoint count alone, so every control-plane replica agrees. Invariants,
// each tested:
//   - Same input, same table: New sorts the identities, and the
//     permutations use a fixed hash, not Go's per-process map hash; a
//     table computed by the control plane equals one computed on any node,
//     on any architecture, with any Go version.
//   - Balance: every endpoint owns floor(size/n) or ceil(size/n) slots.
//   - Small disruption at a fixed size: removing one of n endpoints moves
//     its own flows (1/n) plus about a point of the others' at Size's
//     256–512 slots per endpoint (3 points at 100 per endpoint); adding
//     one moves its new share, 1/(n+1), plus as much. A new size
//     reshuffles everything, so sizes come in tiers (primes 509 … 65,521,
//     just below the powers of two) that change only when the endpoint
//     count crosses a power of two.
//   - Bounds: MinSize <= size <= MaxSize, prime. Each slot costs one
//     nftables map element per service port, which bounds MaxSize; at
//     most MaxSize endpoints.
//
// # The hash nftables computes
//
// JHash is the kernel's jhash (include/linux/jhash.h) and JHashMod the
// value of nftables' `jhash <expr> mod N seed S`, which scales with
// reciprocal_scale (a multiply and a shift), not with a remainder.
// FlowKey and AddrKey build the bytes nftables hashes for
// `ip saddr . tcp sport` and `ip saddr` (and ip6): each element of a
// concatenation sits in its own zero-padded 32-bit register, so an IPv4
// flow key is address(4) . port(2) . 0x0000 (8 bytes) and an IPv6 one 20
// bytes; `tcp sport` and `udp sport` load the same two bytes. TestKernelJHash
// proves the equality against a real kernel (root only, in a network
// namespace it creates and deletes). The kernel reads keys longer than 12
// bytes partly in CPU byte order: JHash matches little-endian kernels.
//
// # How nftables will use it
//
// The control plane computes each service port's table once and ships it
// (with one cluster-wide seed) to every node. The nftables mode renders
// it as a map from slot index to endpoint and a rule
// `jhash ip saddr . tcp sport mod <size> seed <seed> vmap @<map>` (or
// `jhash ip saddr` for client-address affinity). The rule must always say
// `seed`: without it the kernel draws a random seed for each rule it
// loads, so every node (and every reload) would hash differently; an
// explicit `seed 0` is kept (tested). Table.Lookup computes the
// same choice in Go, for tracers and tests. Programming nftables is not
// this package's job: it does no I/O.
package maglev
