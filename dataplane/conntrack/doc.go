// Package conntrack finds and deletes the UDP conntrack entries a
// dataplane change leaves stale. Every kernel mode needs it: UDP has no
// connection teardown, so an entry DNATed to an endpoint that went away
// keeps steering a client's flow into a black hole until it idles out, and
// an entry cached while a service had no endpoints keeps it unreplied.
//
// Two ways in: Stale compares two programmed states (what a mode's sync
// changed), Reconcile compares the table itself with what must be
// forwarded (reconcile.go), for what no change showed. Invariant of
// both: only UDP entries whose destination is a service address or node
// port of ours (or, for Reconcile, a DNATed address of the Service
// ranges) are ever deleted.
package conntrack
