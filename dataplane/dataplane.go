package dataplane

import (
	"context"

	switchyardv1 "github.com/switchyard-proxy/switchyard/proto/switchyard/v1"
)

// State is everything one node must program: its NodeConfig and its
// service views by resource name ("namespace/name"). Callers treat a State
// as immutable once passed to Apply.
type State struct {
	Config   *switchyardv1.NodeConfig
	Services map[string]*switchyardv1.ServiceView
}

// ApplyOptions tune one Apply.
type ApplyOptions struct {
	// Full rewrites everything this mode owns instead of only what changed
	// since the last Apply (periodic resync, first sync after start).
	Full bool
}

// Dataplane programs the kernel of one node in one mode.
type Dataplane interface {
	// Mode names the mode: "iptables", "ipvs", "nftables", "userspace",
	// "dry-run".
	Mode() string
	// Apply makes the kernel forward as st says. It returns when the kernel
	// change has returned, so the caller may ACK.
	Apply(ctx context.Context, st *State, opts ApplyOptions) error
	// Cleanup removes everything this mode programmed, e.g. after the node
	// switched to another mode.
	Cleanup(ctx context.Context) error
}
