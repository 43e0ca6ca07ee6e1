// Package dataplanetest provides test doubles for code that programs a
// dataplane (the node agent):
//
//   - Fake, an in-memory dataplane.Dataplane. It records every Apply and
//     Cleanup in order, keeps the last successfully applied state, and
//     lets a test fail a call through a hook.
//   - Faulty, a wrapper around any dataplane.Dataplane (Cilium's
//     FaultyLBMaps) that injects failures by a Plan: a call refused as a
//     whole, a commit that got half-way, a slow call that honours its
//     context, a failed Cleanup. Scripted plans pin one scenario; seeded
//     random plans make fuzz-like runs that replay by their seed.
//   - The golden inputs every mode's golden tests render, in one place
//     (views/<case>.textproto, embedded): Views lists them, LoadState
//     reads one, Cases gives the ones a mode has goldens for, Golden
//     compares or rewrites a mode's output, and RunGolden is a mode's
//     whole golden test on top of them.
//   - Logger, a slog.Logger that writes through the test, and Eventually,
//     a wait for an outcome with a deadline.
//
// In an agent's test the Faulty stands where the kernel's mode would:
//
//	caller ──Apply/Cleanup──▶ Faulty ──(part of) the call──▶ Fake or a real mode
//	                            │ Plan: Pass │ Fail │ Partial │ Slow
//	                            └▶ Injections(): what it did
//
// Invariants: a failed Fake Apply leaves its applied state unchanged (an
// atomic commit: iptables-restore, one nft transaction); Faulty's Partial
// is the other case every caller must survive, where the kernel holds
// neither the old state nor the new one (IPVS, one family of a
// dual-stack sync). Both are safe for concurrent use.
package dataplanetest
