package fragments

import (
	"iter"
	"slices"

	"github.com/switchyard-proxy/switchyard/dataplane/internal/sorted"
	"github.com/switchyard-proxy/switchyard/dataplane/serviceport"
	switchyardv1 "github.com/switchyard-proxy/switchyard/proto/switchyard/v1"
)

// Memo keeps one fragment F per service, rendered under one key.
type Memo[F any] struct {
	key    string
	byName map[string]*entry[F]
	// Reused and Rendered count services of the last render, for tests.
	Reused, Rendered int
	// HintIgnored counts hints Changed found inconsistent, for tests.
	HintIgnored int
}

type entry[F any] struct {
	sv   *switchyardv1.ServiceView
	frag F
}

// Reset starts a render under key: fragments rendered under another key
// are dropped. It zeroes the counters.
func (m *Memo[F]) Reset(key string) {
	if m.key != key || m.byName == nil {
		m.key, m.byName = key, map[string]*entry[F]{}
	}
	m.Reused, m.Rendered = 0, 0
}

// Holds reports whether the memo holds fragments rendered under key: a
// partial sync may then render only what changed.
func (m *Memo[F]) Holds(key string) bool { return m.byName != nil && m.key == key }

// Forget drops every fragment: the next render starts over.
func (m *Memo[F]) Forget() { m.byName = nil }

// Len is the number of services held.
func (m *Memo[F]) Len() int { return len(m.byName) }

// Lookup returns the fragment of a service whose view is unchanged: the
// same message (the agent keeps unchanged resources) or an equal one (a
// resend after a reconnect). A hit counts as Reused.
func (m *Memo[F]) Lookup(name string, sv *switchyardv1.ServiceView) (F, bool) {
	e, ok := m.byName[name]
	if !ok || !serviceport.Unchanged(e.sv, sv) {
		var zero F
		return zero, false
	}
	e.sv = sv // the next lookup of this message is a pointer compare
	m.Reused++
	return e.frag, true
}

// Fragments yields, in name order, the fragment of every service of
// services: the one held when its view is unchanged (Lookup), else one
// from render, which is held and counted as Rendered; fresh tells the
// two apart. It is a full render's loop: Reset first, KeepOnly after.
func (m *Memo[F]) Fragments(services map[string]*switchyardv1.ServiceView,
	render func(name string, sv *switchyardv1.ServiceView) F) iter.Seq2[F, bool] {
	return func(yield func(F, bool) bool) {
		for _, n := range sorted.Keys(services) {
			sv := services[n]
			f, ok := m.Lookup(n, sv)
			if !ok {
				f = render(n, sv)
				m.Put(n, sv, f)
				m.Rendered++
			}
			if !yield(f, !ok) {
				return
			}
		}
	}
}

// Get returns the fragment held for name, whatever view it came from.
func (m *Memo[F]) Get(name string) (F, bool) {
	e, ok := m.byName[name]
	if !ok {
		var zero F
		return zero, false
	}
	return e.frag, true
}

// Put holds f as the fragment of name rendered from sv.
func (m *Memo[F]) Put(name string, sv *switchyardv1.ServiceView, f F) {
	if m.byName == nil {
		m.byName = map[string]*entry[F]{}
	}
	m.byName[name] = &entry[F]{sv: sv, frag: f}
}

// Delete drops the fragment of name.
func (m *Memo[F]) Delete(name string) { delete(m.byName, name) }

// KeepOnly drops the fragments of services not in services (gone since
// the last render).
func (m *Memo[F]) KeepOnly(services map[string]*switchyardv1.ServiceView) {
	for name := range m.byName {
		if _, ok := services[name]; !ok {
			delete(m.byName, name)
		}
	}
}

// All yields the fragments in name order.
func (m *Memo[F]) All() iter.Seq2[string, F] {
	return func(yield func(string, F) bool) {
		for _, n := range sorted.Keys(m.byName) {
			if !yield(n, m.byName[n].frag) {
				return
			}
		}
	}
}

// Change is one service whose fragment differs: its view (nil when it
// was removed) and its old and new fragments (the zero F for none).
type Change[F any] struct {
	Name     string
	View     *switchyardv1.ServiceView
	Old, New F
}

// Changes is Changed with, for each service, the fragment held and, but
// for a removed service, its new one from render, called in name order.
func (m *Memo[F]) Changes(services map[string]*switchyardv1.ServiceView, hint map[string]struct{},
	render func(name string, sv *switchyardv1.ServiceView) F) []Change[F] {
	names := m.Changed(services, hint)
	out := make([]Change[F], 0, len(names))
	for _, name := range names {
		c := Change[F]{Name: name, View: services[name]}
		c.Old, _ = m.Get(name)
		if c.View != nil {
			c.New = render(name, c.View)
		}
		out = append(out, c)
	}
	return out
}

// Changed returns, sorted, the names of the services that were added to,
// removed from or changed in services since the fragments were rendered:
// among the names in hint when it is not nil, else among every service
// of services and of the memo. A service found unchanged is held with
// its new message, so that the next compare is a pointer compare.
//
// A hint is checked for what can be checked cheaply: the services it
// adds and removes must account for the number of services. When they
// do not, it is ignored (HintIgnored) and every service compared.
func (m *Memo[F]) Changed(services map[string]*switchyardv1.ServiceView, hint map[string]struct{}) []string {
	if hint != nil {
		if out, ok := m.changedAmong(services, hint); ok {
			return out
		}
		m.HintIgnored++
	}
	var out []string
	for name, sv := range services {
		if m.differs(name, sv) {
			out = append(out, name)
		}
	}
	for name := range m.byName {
		if _, ok := services[name]; !ok {
			out = append(out, name)
		}
	}
	slices.Sort(out)
	return out
}

func (m *Memo[F]) changedAmong(services map[string]*switchyardv1.ServiceView, hint map[string]struct{}) ([]string, bool) {
	out := make([]string, 0, len(hint))
	count := len(m.byName)
	for name := range hint {
		sv, now := services[name]
		_, held := m.byName[name]
		switch {
		case now && !held:
			count++
		case !now && held:
			count--
		case !now:
			continue // neither here nor held: nothing of ours
		}
		if !now || m.differs(name, sv) {
			out = append(out, name)
		}
	}
	if count != len(services) {
		return nil, false
	}
	slices.Sort(out)
	return out, true
}

// differs reports whether sv is not the view name's fragment was
// rendered from; an unchanged view is held as the new message.
func (m *Memo[F]) differs(name string, sv *switchyardv1.ServiceView) bool {
	e, ok := m.byName[name]
	if !ok || !serviceport.Unchanged(e.sv, sv) {
		return true
	}
	e.sv = sv
	return false
}
