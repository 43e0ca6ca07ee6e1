// Package runtest runs the agent's components in tests: Start runs a
// component's Run(ctx) in the background until the test ends, and
// Eventually waits for what it does.
//
// Invariants:
//   - A component Start runs has returned by the end of the test, so
//     goleak finds nothing left, and an error it returned fails the test.
//   - Nothing sleeps to wait for an event: Eventually polls a condition,
//     bounded by Timeout, and fails the test when it passes.
package runtest
