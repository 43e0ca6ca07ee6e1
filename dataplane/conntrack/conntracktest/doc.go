// Package conntracktest is an in-memory conntrack.Table for unit tests of
// what drives the reconciler: entries are added by the test, listed and
// deleted as the kernel would, and Dump prints what is left in a stable
// order. Fail injects errors.
//
// Invariants: ListUDP returns the entries in insertion order;
// DeleteEntries removes exactly the entries given that are present and
// counts them; a Table is safe for concurrent use.
package conntracktest
