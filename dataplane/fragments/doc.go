// Package fragments is the render memo every kernel mode shares: for one
// mode and one family it keeps what each service rendered (the service's
// fragment of the ruleset) between syncs, and finds the services a
// partial sync must render again.
//
//	dataplane.State ─┐
//	ApplyOptions.Changed (hint) ─┴▶ Memo.Changed ─▶ names to render ─▶ mode diffs their
//	                                   │                              old and new fragments
//	                                   └ every other service: its fragment as applied
//
// The control plane knows which services changed and the agent passes
// their names down (kube-proxy's UpdatedServices does the same for its
// proxiers); without that hint, Changed compares every service with its
// fragment's view, by pointer first, as the agent keeps unchanged
// messages.
//
// Invariants: a fragment is reused only for a view Unchanged from the
// one it was rendered from, and only under the key it was rendered under
// (the node settings it depends on). A hint is trusted for the services
// it leaves out, but a hint that cannot be right (the number of services
// does not add up) is ignored and every service compared. A Memo is not
// safe for concurrent use; the zero value is ready.
package fragments
