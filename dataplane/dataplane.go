package dataplane

import (
	"context"
	"errors"

	switchyardv1 "github.com/switchyard-proxy/switchyard/proto/switchyard/v1"
)

// State is everything one node must program: its NodeConfig and its
// service views by resource name ("namespace/name"). Callers treat a State
// as immutable once passed to Apply.
type State struct {
	Config   *switchyardv1.NodeConfig
	Services map[string]*switchyardv1.ServiceView
	// Links are the names of the node's network interfaces as the agent
	// last saw them (its link watch), sorted; nil when nobody watches.
	// Only a mode that programs per-interface objects reads them (the
	// nftables mode's flowtable, NodeConfig.flowtable_interfaces).
	Links []string
}

// ApplyOptions tune one Apply.
type ApplyOptions struct {
	// Full rewrites everything this mode owns instead of only what changed
	// since the last Apply (periodic resync, first sync after start).
	Full bool
	// Changed, when not nil, is a hint: it names every service that may
	// differ from the state of this Dataplane's last successful Apply —
	// added, updated, or removed (a name st.Services lacks). A partial
	// sync then looks at these services only and takes every other one
	// as applied, instead of comparing each with what it applied. Nil
	// means unknown: every service is compared. A full sync ignores it,
	// and so may any mode. It must be a superset of what changed: a
	// service left out keeps its old rules until the next full sync (a
	// hint whose additions and removals do not add up to st is ignored).
	Changed map[string]struct{}
}

// ErrUnavailable marks the error of a mode the node's kernel cannot run
// (ipvs without IPVS, say). Nothing of such a mode can exist on the node
// either, so a cleanup of every mode skips it. Test with errors.Is.
var ErrUnavailable = errors.New("dataplane mode unavailable on this kernel")

// Dataplane programs the kernel of one node in one mode.
type Dataplane interface {
	// Mode names the mode: "iptables", "ipvs", "nftables", "userspace",
	// "dry-run".
	Mode() string
	// Apply makes the kernel forward as st says. It returns when the kernel
	// change has returned, so the caller may ACK.
	Apply(ctx context.Context, st *State, opts ApplyOptions) error
	// Cleanup removes everything this mode programmed, e.g. after the node
	// switched to another mode. It must work without a prior Apply, on
	// what an earlier process left (a restart in another mode, an
	// uninstall), and touch nothing that is not the mode's.
	Cleanup(ctx context.Context) error
}

// Drainer is a Dataplane whose kernel carries connections no other mode
// can take over: an IPVS connection is IPVS's own state, not a netfilter
// NAT binding, so removing the mode's virtual servers (or the addresses
// they answer on) breaks it, while a netfilter mode's established
// connections keep their conntrack entries whatever rules replace it.
// Whoever removes such a mode (a mode switch, a leftover cleanup) waits
// until Connections is 0, or a bound, before Cleanup; new connections
// meanwhile take the new mode's rules, which see them first.
type Drainer interface {
	// Connections counts the connections the mode's kernel objects still
	// carry (IPVS: active and inactive ones of its virtual servers); 0
	// when the mode has nothing in the kernel.
	Connections(ctx context.Context) (int, error)
}

// ErrDraining marks a cleanup postponed while a Drainer's connections
// drain: nothing failed, and the caller should try again shortly rather
// than at its next full sync. Test with errors.Is.
var ErrDraining = errors.New("connections still draining")

// DriftChecker is a Dataplane that can tell whether the kernel still
// holds what its last successful Apply programmed: someone flushed a
// table, deleted a chain or an element, or changed a rule of its own.
// The agent calls it every few seconds and repairs a drift with a full
// Apply, which writes only what differs.
type DriftChecker interface {
	// CheckDrift reports what differs from the last successful Apply
	// (nothing before the first). It must be cheap while nothing changed
	// (a kernel generation number or a canary, not a read-back of the
	// rules) and read back only when that cheap check says something may
	// have. Objects that are not the mode's are never reported: a
	// foreign rule in a foreign chain or table is left alone. After a
	// reported drift the next full Apply must not trust what it applied
	// last (it relearns the kernel), so it repairs whatever is missing.
	CheckDrift(ctx context.Context) (Drift, error)
}

// Drift kinds, the "what" label of the agent's repairs metric.
const (
	DriftTable   = "table"
	DriftChain   = "chain"
	DriftRule    = "rule"
	DriftSet     = "set"
	DriftElement = "element"
	// DriftFlowtable: a flowtable missing, not the mode's, or holding
	// a device the mode did not add (nftables).
	DriftFlowtable = "flowtable"
)

// Drift is what one check found.
type Drift struct {
	// Kinds counts the objects that differ by kind (Drift*): missing,
	// extra within the mode's own objects, or changed.
	Kinds map[string]int
	// Detail names some of them (at most a few, for logs and reports).
	Detail []string
	// ReadBack: the cheap check saw a change, so the kernel was read
	// back (a foreign change that turned out to touch nothing of the
	// mode's reads back and reports no drift).
	ReadBack bool
}

// Drifted reports whether anything differs.
func (d Drift) Drifted() bool { return len(d.Kinds) > 0 }

// Add counts one object of kind that differs, naming it in Detail while
// Detail holds fewer than eight names.
func (d *Drift) Add(kind, what string) {
	if d.Kinds == nil {
		d.Kinds = map[string]int{}
	}
	d.Kinds[kind]++
	if len(d.Detail) < 8 {
		d.Detail = append(d.Detail, kind+" "+what)
	}
}
