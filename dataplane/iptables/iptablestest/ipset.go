package iptablestest

import (
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"sort"
	"strconv"
	"strings"
)

// ipset is one set as the kernel keeps it.
type ipset struct {
	typ, family string
	maxelem     int
	members     map[string]bool
}

// errNoSet is what ipset says about a missing set; callers match on
// "does not exist" as they do with the real binary.
var errNoSet = errors.New("The set with the given name does not exist")

// ipsetRun implements "ipset save [NAME]", "ipset list -n",
// "ipset restore [-exist]" and the single commands (create, add, del,
// flush, destroy, swap) with their arguments.
func (f *Fake) ipsetRun(args []string, stdin []byte) ([]byte, error) {
	if len(args) == 0 {
		return nil, errors.New("ipset: no command")
	}
	exist := slices.Contains(args, "-exist")
	args = slices.DeleteFunc(slices.Clone(args), func(a string) bool { return a == "-exist" })
	switch args[0] {
	case "save":
		name := ""
		if len(args) > 1 {
			name = args[1]
			if _, ok := f.sets[name]; !ok {
				return nil, fmt.Errorf("ipset save %s: %w", name, errNoSet)
			}
		}
		return []byte(f.ipsetSave(name)), nil
	case "list":
		if len(args) != 2 || args[1] != "-n" {
			return nil, fmt.Errorf("ipset %v: %w", args, ErrNotFound)
		}
		var b strings.Builder
		for _, n := range sortedNames(f.sets) {
			b.WriteString(n + "\n")
		}
		return []byte(b.String()), nil
	case "restore":
		return nil, f.ipsetRestore(string(stdin), exist)
	}
	if err := f.ipsetLine(args, exist); err != nil {
		return nil, fmt.Errorf("ipset %s: %w", strings.Join(args, " "), err)
	}
	return nil, nil
}

// ipsetRestore applies restore input line by line; like ipset, it stops
// at the first error and keeps what came before.
func (f *Fake) ipsetRestore(input string, exist bool) error {
	for i, line := range strings.Split(input, "\n") {
		fl := strings.Fields(line)
		if len(fl) == 0 || strings.HasPrefix(fl[0], "#") || fl[0] == "COMMIT" {
			continue
		}
		if err := f.ipsetLine(fl, exist); err != nil {
			return fmt.Errorf("ipset restore line %d %q: %w", i+1, line, err)
		}
	}
	return nil
}

func (f *Fake) ipsetLine(fl []string, exist bool) error {
	if len(fl) < 2 {
		return errors.New("syntax error")
	}
	cmd, name := fl[0], fl[1]
	s, ok := f.sets[name]
	if cmd != "create" && !ok {
		return errNoSet
	}
	switch cmd {
	case "create":
		return f.ipsetCreate(fl, s, exist)
	case "add", "del":
		if len(fl) != 3 {
			return errors.New("syntax error")
		}
		if err := validMember(s, fl[2]); err != nil {
			return err
		}
		has := s.members[fl[2]]
		switch {
		case cmd == "add" && has && !exist:
			return errors.New("Element cannot be added to the set: it's already added")
		case cmd == "del" && !has && !exist:
			return errors.New("Element cannot be deleted from the set: it's not added")
		case cmd == "add" && !has && len(s.members) >= s.maxelem:
			return errors.New("Hash is full, cannot add more elements")
		case cmd == "add":
			s.members[fl[2]] = true
		default:
			delete(s.members, fl[2])
		}
	case "flush":
		clear(s.members)
	case "destroy":
		if f.setInUse(name) {
			return errors.New("Set cannot be destroyed: it is in use by a kernel component")
		}
		delete(f.sets, name)
	case "swap":
		o, ok := f.sets[fl[len(fl)-1]]
		if len(fl) != 3 || !ok {
			return errNoSet
		}
		if o.typ != s.typ || o.family != s.family {
			return errors.New("The sets cannot be swapped: their type does not match")
		}
		f.sets[name], f.sets[fl[2]] = o, s
	default:
		return fmt.Errorf("unknown command %s", cmd)
	}
	return nil
}

func (f *Fake) ipsetCreate(fl []string, s *ipset, exist bool) error {
	if len(fl) < 3 || len(fl[1]) > 31 {
		return errors.New("syntax error in create")
	}
	n := &ipset{typ: fl[2], maxelem: 65536, members: map[string]bool{}}
	for i := 3; i+1 < len(fl); i++ {
		switch fl[i] {
		case "family":
			n.family = fl[i+1]
		case "maxelem":
			v, err := strconv.Atoi(fl[i+1])
			if err != nil || v < 1 {
				return fmt.Errorf("bad maxelem %q", fl[i+1])
			}
			n.maxelem = v
		}
	}
	if strings.HasPrefix(n.typ, "hash:") && n.family == "" {
		n.family = "inet"
	}
	if s != nil {
		if !exist || s.typ != n.typ || s.family != n.family {
			return errors.New("Set cannot be created: set with the same name already exists")
		}
		return nil
	}
	f.sets[fl[1]] = n
	return nil
}

// setInUse reports whether a rule of any family matches set name.
func (f *Fake) setInUse(name string) bool {
	for _, ts := range f.fams {
		for _, t := range ts {
			for _, c := range t {
				for _, r := range c.rules {
					if setOf(r) == name {
						return true
					}
				}
			}
		}
	}
	return false
}

// checkSets refuses, with CheckSetRefs, a table whose rules match a set
// that does not exist.
func (f *Fake) checkSets(t table) error {
	if !f.CheckSetRefs {
		return nil
	}
	for n, c := range t {
		for _, r := range c.rules {
			if s := setOf(r); s != "" && f.sets[s] == nil {
				return fmt.Errorf("chain %s: Set %s doesn't exist", n, s)
			}
		}
	}
	return nil
}

// setOf returns the set a rule matches, "" if none.
func setOf(rule string) string {
	f := strings.Fields(rule)
	for i := 0; i+1 < len(f); i++ {
		if f[i] == "--match-set" {
			return f[i+1]
		}
	}
	return ""
}

// ipsetSave prints one set (or all, name "") as `ipset save` does.
func (f *Fake) ipsetSave(name string) string {
	var b strings.Builder
	for _, n := range sortedNames(f.sets) {
		if name != "" && n != name {
			continue
		}
		s := f.sets[n]
		fmt.Fprintf(&b, "create %s %s family %s hashsize 1024 maxelem %d bucketsize 12\n", n, s.typ, s.family, s.maxelem)
		members := make([]string, 0, len(s.members))
		for m := range s.members {
			members = append(members, m)
		}
		sort.Strings(members)
		for _, m := range members {
			fmt.Fprintf(&b, "add %s %s\n", n, m)
		}
	}
	return b.String()
}

// validMember checks a hash:ip,port,ip member against the set's family
// in the spelling ipset save prints; other types accept anything.
func validMember(s *ipset, m string) error {
	if s.typ != "hash:ip,port,ip" {
		return nil
	}
	addr := func(x string) bool {
		a, err := netip.ParseAddr(x)
		return err == nil && a.String() == x && a.Is4() == (s.family == "inet")
	}
	parts := strings.Split(m, ",")
	if len(parts) == 3 && addr(parts[0]) && addr(parts[2]) {
		proto, port, ok := strings.Cut(parts[1], ":")
		v, err := strconv.Atoi(port)
		if ok && (proto == "tcp" || proto == "udp" || proto == "sctp") && err == nil && v > 0 && v < 65536 {
			return nil
		}
	}
	return fmt.Errorf("Syntax error: bad %s member %q", s.typ, m)
}

func sortedNames(m map[string]*ipset) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
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
	out := make([]string, 0, len(s.members))
	for m := range s.members {
		out = append(out, m)
	}
	sort.Strings(out)
	return out
}

// AddSet creates a set with members, as other software would.
func (f *Fake) AddSet(name, typ, family string, members ...string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	s := &ipset{typ: typ, family: family, maxelem: 65536, members: map[string]bool{}}
	for _, m := range members {
		s.members[m] = true
	}
	f.sets[name] = s
}
