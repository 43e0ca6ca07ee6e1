package view

import (
	"maps"
	"slices"
	"sort"
	"time"

	"github.com/switchyard-proxy/switchyard/dataplane"
	switchyardv1 "github.com/switchyard-proxy/switchyard/proto/switchyard/v1"
)

// View is a node view as the agent holds it. Treat it as immutable.
type View struct {
	// SystemVersion is the control plane's version of the whole view; empty
	// when nothing was received yet.
	SystemVersion string
	// Resources by name.
	Resources map[string]*switchyardv1.Resource
}

// Update is one complete batch from the control plane (the union of the
// parts of a split batch).
type Update struct {
	SystemVersion string
	// Changed or added resources by name.
	Resources map[string]*switchyardv1.Resource
	// Names of removed resources.
	Removed []string
	// Triggers are the trigger times the control plane sent beside
	// Resources (the responses' change_triggers), by resource name: when
	// the changes this update brings began. Never persisted: an update
	// restored from disk is no change and carries none.
	Triggers map[string][]time.Time
}

// Versions returns the version of every resource by name, as sent in
// initial_resource_versions.
func (v *View) Versions() map[string]string {
	out := make(map[string]string, len(v.Resources))
	for name, r := range v.Resources {
		out[name] = r.GetVersion()
	}
	return out
}

// With returns a new View: v with us applied in order. v is not modified.
func (v *View) With(us ...*Update) *View {
	next, _ := v.with(nil, us)
	return next
}

// WithState is With that also returns the dataplane state of the new
// View, derived from st, v's (State builds it when st is nil). Each map
// is copied once, however many updates: the syncer applies a batch with
// it and never rebuilds a state from a whole view. Neither v nor st is
// modified.
func (v *View) WithState(st *dataplane.State, us ...*Update) (*View, *dataplane.State) {
	if st == nil {
		st = v.State()
	}
	return v.with(st, us)
}

// with is With, carrying st along unless it is nil.
func (v *View) with(st *dataplane.State, us []*Update) (*View, *dataplane.State) {
	next := &View{SystemVersion: v.SystemVersion, Resources: cloneMap(v.Resources)}
	var nst *dataplane.State
	if st != nil {
		nst = &dataplane.State{Config: st.Config, Services: cloneMap(st.Services)}
	}
	for _, u := range us {
		next.SystemVersion = u.SystemVersion
		for _, name := range u.Removed {
			forget(nst, name, next.Resources[name])
			delete(next.Resources, name)
		}
		for name, r := range u.Resources {
			forget(nst, name, next.Resources[name])
			next.Resources[name] = r
			add(nst, name, r)
		}
	}
	return next, nst
}

// forget drops from st (when not nil) what old, the resource name being
// replaced or removed, put in it.
func forget(st *dataplane.State, name string, old *switchyardv1.Resource) {
	switch {
	case st == nil:
	case old.GetService() != nil:
		delete(st.Services, name)
	case old.GetNodeConfig() != nil && old.GetNodeConfig() == st.Config:
		st.Config = nil
	}
}

// add puts r, the resource name, into st (when not nil).
func add(st *dataplane.State, name string, r *switchyardv1.Resource) {
	switch {
	case st == nil:
	case r.GetService() != nil:
		st.Services[name] = r.GetService()
	case r.GetNodeConfig() != nil:
		st.Config = r.GetNodeConfig()
	}
}

// cloneMap is maps.Clone, never nil.
func cloneMap[V any](m map[string]V) map[string]V {
	if m == nil {
		return map[string]V{}
	}
	return maps.Clone(m)
}

// WithAdded returns v with u's resources added or updated and u's
// removals ignored: what a restart restores when u may or may not have
// reached the kernel (persist's intents). The version stays v's.
func (v *View) WithAdded(u *Update) *View {
	res := make(map[string]*switchyardv1.Resource, len(v.Resources)+len(u.Resources))
	maps.Copy(res, v.Resources)
	maps.Copy(res, u.Resources)
	return &View{SystemVersion: v.SystemVersion, Resources: res}
}

// Merge returns the union of a and b, b later: every resource either
// carries (b's where both do; a later removal does not drop an earlier
// resource) and the names either removes that neither carries, with b's
// system version. It describes everything a and b may have put in the
// kernel. a may be nil; neither is modified.
func Merge(a, b *Update) *Update {
	out := &Update{SystemVersion: b.SystemVersion, Resources: make(map[string]*switchyardv1.Resource, len(b.Resources))}
	var removed []string
	if a != nil {
		maps.Copy(out.Resources, a.Resources)
		removed = append(removed, a.Removed...)
	}
	maps.Copy(out.Resources, b.Resources)
	seen := map[string]bool{}
	for _, name := range append(removed, b.Removed...) {
		if _, kept := out.Resources[name]; !kept && !seen[name] {
			seen[name] = true
			out.Removed = append(out.Removed, name)
		}
	}
	sort.Strings(out.Removed)
	return out
}

// Changed returns every name the updates carry or remove: the resources
// that may differ from the view before them.
func Changed(us ...*Update) map[string]struct{} {
	out := map[string]struct{}{}
	for _, u := range us {
		for name := range u.Resources {
			out[name] = struct{}{}
		}
		for _, name := range u.Removed {
			out[name] = struct{}{}
		}
	}
	return out
}

// Names returns the sorted resource names.
func (v *View) Names() []string {
	out := make([]string, 0, len(v.Resources))
	for name := range v.Resources {
		out = append(out, name)
	}
	sort.Strings(out)
	return out
}

// NodeConfig returns the view's NodeConfig, nil when it has none.
func (v *View) NodeConfig() *switchyardv1.NodeConfig {
	for _, r := range v.Resources {
		if c := r.GetNodeConfig(); c != nil {
			return c
		}
	}
	return nil
}

// State returns the dataplane state of v.
func (v *View) State() *dataplane.State {
	st := &dataplane.State{Services: make(map[string]*switchyardv1.ServiceView, len(v.Resources))}
	for name, r := range v.Resources {
		switch {
		case r.GetService() != nil:
			st.Services[name] = r.GetService()
		case r.GetNodeConfig() != nil:
			st.Config = r.GetNodeConfig()
		}
	}
	return st
}

// TriggerTimes returns the trigger times of u's resources a programming
// latency can be measured from, oldest first: those of resources u
// carries, none before since (the agent's start: an older trigger is the
// age of a change an earlier process programmed, kube-proxy's rule) and
// none after end (when the kernel change returned: a time in the future
// is a bad clock or annotation, not a latency).
func (u *Update) TriggerTimes(since, end time.Time) []time.Time {
	var out []time.Time
	for name, times := range u.Triggers {
		if _, ok := u.Resources[name]; !ok {
			continue
		}
		for _, t := range times {
			if !t.Before(since) && !t.After(end) {
				out = append(out, t)
			}
		}
	}
	slices.SortFunc(out, func(a, b time.Time) int { return a.Compare(b) })
	return out
}

// Applied is what an apply reports back, for the ACK's ApplyReport.
type Applied struct {
	// Duration is the time the dataplane spent programming.
	Duration time.Duration
	// ProgrammingLatency is the time from the oldest usable trigger time
	// of the update (TriggerTimes) to the moment the kernel change
	// returned; valid only when HasLatency, which an update without one
	// leaves false.
	ProgrammingLatency time.Duration
	HasLatency         bool
	// Mode is the mode programmed once the apply is done (a NodeConfig in
	// the update may have switched it).
	Mode switchyardv1.DataplaneMode
}
