// Package ipsettest provides Fake, an in-memory stand-in for the ipset
// binary behind command.Runner. It is the one fake of ipset for every
// mode that uses sets: iptablestest.Fake and ipvstest.Fake hand it their
// `ipset …` commands, so that both modes are tested against the same
// kernel semantics.
//
// Fake keeps one namespace-wide list of sets, as the kernel does, and
// implements what the modes run: save [NAME], list -n, restore [-exist]
// (line by line, stopping at the first error and keeping what came
// before, as ipset does) and the single commands create, add, del,
// flush, destroy and swap. Members are checked against the set's type
// and family in the spelling ipset save prints, so a mode that renders a
// member ipset would respell fails here as its read-back would drift.
// Destroy refuses a set the owner's InUse hook reports in use.
package ipsettest

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"

	"github.com/switchyard-proxy/switchyard/dataplane/internal/sorted"
)

// Fake is an in-memory ipset.
type Fake struct {
	// InUse, when set, reports whether a kernel component (an iptables
	// rule) matches set name; destroy then refuses, as the kernel does.
	// It is called with the Fake's lock held and must not call back into
	// the Fake; its owner calls Run with its own lock held if InUse needs
	// it.
	InUse func(name string) bool

	mu   sync.Mutex
	sets map[string]*set
}

// set is one set as the kernel keeps it.
type set struct {
	typ, family string
	maxelem     int
	lo, hi      int // bitmap:port range
	members     map[string]bool
}

// New returns a Fake without sets.
func New() *Fake { return &Fake{sets: map[string]*set{}} }

// errNoSet is what ipset says about a missing set; callers match on
// "does not exist" as they do with the real binary.
var errNoSet = errors.New("The set with the given name does not exist")

// Run implements command.Runner for argv "ipset …".
func (f *Fake) Run(_ context.Context, argv []string, stdin []byte) ([]byte, error) {
	if len(argv) < 2 || argv[0] != "ipset" {
		return nil, fmt.Errorf("%v: not an ipset command", argv)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	args, exist := stripExist(argv[1:])
	if len(args) == 0 {
		return nil, errors.New("ipset: no command")
	}
	switch args[0] {
	case "save":
		name := ""
		if len(args) > 1 {
			name = args[1]
			if _, ok := f.sets[name]; !ok {
				return nil, fmt.Errorf("ipset save %s: %w", name, errNoSet)
			}
		}
		return []byte(f.save(name)), nil
	case "list":
		if len(args) != 2 || args[1] != "-n" {
			return nil, fmt.Errorf("ipset %s: not implemented by the fake", strings.Join(args, " "))
		}
		var b strings.Builder
		for _, n := range sorted.Keys(f.sets) {
			b.WriteString(n + "\n")
		}
		return []byte(b.String()), nil
	case "restore":
		return nil, f.restore(string(stdin), exist)
	}
	if err := f.line(args, exist); err != nil {
		return nil, fmt.Errorf("ipset %s: %w", strings.Join(args, " "), err)
	}
	return nil, nil
}

// stripExist removes -exist from args and reports whether it was there.
func stripExist(args []string) ([]string, bool) {
	exist := slices.Contains(args, "-exist")
	return slices.DeleteFunc(slices.Clone(args), func(a string) bool { return a == "-exist" }), exist
}

// restore applies restore input line by line; like ipset, it stops at the
// first error and keeps what came before.
func (f *Fake) restore(input string, exist bool) error {
	for i, line := range strings.Split(input, "\n") {
		fl, lineExist := stripExist(strings.Fields(line))
		if len(fl) == 0 || strings.HasPrefix(fl[0], "#") || fl[0] == "COMMIT" {
			continue
		}
		if err := f.line(fl, exist || lineExist); err != nil {
			return fmt.Errorf("ipset restore line %d %q: %w", i+1, line, err)
		}
	}
	return nil
}

// line applies one command. The caller holds f.mu.
func (f *Fake) line(fl []string, exist bool) error {
	if len(fl) < 2 {
		return errors.New("Syntax error: missing set name")
	}
	cmd, name := fl[0], fl[1]
	s, ok := f.sets[name]
	if cmd != "create" && !ok {
		return errNoSet
	}
	switch cmd {
	case "create":
		return f.create(fl, s, exist)
	case "add", "del":
		if len(fl) != 3 {
			return errors.New("Syntax error: one member per line")
		}
		return s.addDel(cmd == "add", fl[2], exist)
	case "flush":
		clear(s.members)
	case "destroy":
		if f.InUse != nil && f.InUse(name) {
			return errors.New("Set cannot be destroyed: it is in use by a kernel component")
		}
		delete(f.sets, name)
	case "swap":
		if len(fl) != 3 {
			return errors.New("Syntax error: swap takes two sets")
		}
		o, ok := f.sets[fl[2]]
		if !ok {
			return errNoSet
		}
		if o.typ != s.typ || o.family != s.family {
			return errors.New("The sets cannot be swapped: their type does not match")
		}
		f.sets[name], f.sets[fl[2]] = o, s
	default:
		return fmt.Errorf("Syntax error: unknown command %s", cmd)
	}
	return nil
}

func (s *set) addDel(add bool, m string, exist bool) error {
	if err := s.validMember(m); err != nil {
		return err
	}
	has := s.members[m]
	switch {
	case add && has && !exist:
		return errors.New("Element cannot be added to the set: it's already added")
	case !add && !has && !exist:
		return errors.New("Element cannot be deleted from the set: it's not added")
	case add && !has && len(s.members) >= s.maxelem:
		return errors.New("Hash is full, cannot add more elements")
	case add:
		s.members[m] = true
	default:
		delete(s.members, m)
	}
	return nil
}

// save prints one set (or all, name "") as `ipset save` does.
func (f *Fake) save(name string) string {
	var b strings.Builder
	for _, n := range sorted.Keys(f.sets) {
		if name != "" && n != name {
			continue
		}
		s := f.sets[n]
		if isBitmap(s.typ) {
			fmt.Fprintf(&b, "create %s %s range %d-%d\n", n, s.typ, s.lo, s.hi)
		} else {
			fmt.Fprintf(&b, "create %s %s family %s hashsize 1024 maxelem %d bucketsize 12\n", n, s.typ, s.family, s.maxelem)
		}
		for _, m := range sorted.Keys(s.members) {
			fmt.Fprintf(&b, "add %s %s\n", n, m)
		}
	}
	return b.String()
}

// Save prints every set as `ipset save` does; "" when there is none.
func (f *Fake) Save() string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.save("")
}

// Exists reports whether set name exists (what the kernel checks when a
// rule that matches it is added).
func (f *Fake) Exists(name string) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	_, ok := f.sets[name]
	return ok
}

// Set is one set as Sets reports it.
type Set struct {
	Name, Type, Family string
	Members            []string // sorted
}

// Sets returns every set, sorted by name (for owners' dumps).
func (f *Fake) Sets() []Set {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := make([]Set, 0, len(f.sets))
	for _, n := range sorted.Keys(f.sets) {
		s := f.sets[n]
		out = append(out, Set{Name: n, Type: s.typ, Family: s.family, Members: sorted.Keys(s.members)})
	}
	return out
}

// SetMembers returns the members of a set, sorted; nil when it does not
// exist.
func (f *Fake) SetMembers(name string) []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	s, ok := f.sets[name]
	if !ok {
		return nil
	}
	return sorted.Keys(s.members)
}

// AddSet creates a set with members as other software would: members are
// not checked, and a bitmap set spans every port.
func (f *Fake) AddSet(name, typ, family string, members ...string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	s := &set{typ: typ, family: family, maxelem: defaultMaxElem, members: map[string]bool{}}
	if isBitmap(typ) {
		s.hi = 65535
	}
	for _, m := range members {
		s.members[m] = true
	}
	f.sets[name] = s
}
