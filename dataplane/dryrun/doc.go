// Package dryrun is the dry-run dataplane: it programs nothing and prints,
// for every Apply, what a mode would program, as deterministic text (sorted
// by resource name, one line per service, port and endpoint), so two applies
// of the same state print the same bytes.
//
// Invariants: it never touches the kernel; Cleanup only prints.
package dryrun
