// Package apistatus knows whether the control plane's watch of the
// Kubernetes API is live, per resource, and keeps an API-server outage
// from turning into a slow recovery.
//
// Every informer's ListerWatcher is wrapped (Tracker.Wrap). Each List or
// Watch call's outcome moves the resource's state:
//
//	pending ──success──▶ available ──unreachable──▶ unavailable(since, error)
//	   └──────unreachable───────────────▲ ◀────────success────────┘
//
// Why the wrapper retries itself: client-go's reflector answers a refused
// watch with its exponential backoff (0.8 s doubling to 30 s, jitter 1.0),
// so after a 60 s outage the first change waited 22–64 s for the next
// attempt while every node was silently stale. While the server is
// unreachable (a transport error, or 429/502/503/504), the wrapper repeats
// the call at a fixed, short interval inside List or Watch instead, and the
// reflector sees only the outcome once the server answers: a working watch,
// or the "too old resource version" that makes it relist at once (after
// its first, sub-second backoff step). The cost while the server is down is
// one connection attempt per resource per interval.
//
// Answers that are not an outage (410 Gone, 404, 403) go to the reflector
// unchanged; 401 and 403 still mark the resource unavailable, since the
// control plane cannot read it, but the reflector's backoff applies.
//
// One warning is logged per outage (the first resource that becomes
// unavailable), and one line when every resource is available again, with
// the outage's length; the metrics and AdminService read Snapshot.
package apistatus
