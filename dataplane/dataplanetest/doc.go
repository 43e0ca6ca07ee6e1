// Package dataplanetest provides Fake, an in-memory dataplane.Dataplane for
// tests of code that programs a dataplane (the node agent). Fake records
// every Apply and Cleanup in order, keeps the last successfully applied
// state, and lets a test inject failures through a hook.
//
// Invariants: a failed Apply leaves the applied state unchanged, as every
// real mode must; Fake is safe for concurrent use.
package dataplanetest
