package iptablestest

import (
	"fmt"
	"strings"
)

// The ipsets themselves live in an ipsettest.Fake (f.sets), the one fake
// of ipset every mode's fake delegates to; what stays here is how they
// meet the rules: a set a rule matches cannot be destroyed, and (with
// CheckSetRefs) a rule cannot match a set that does not exist.

// setInUse reports whether a rule of any family matches set name. It is
// the ipset fake's InUse hook: the ipset fake calls it from Run, which
// this Fake calls with f.mu held.
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
			if s := setOf(r); s != "" && !f.sets.Exists(s) {
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

// SetMembers returns the members of a set, sorted; nil when it does not
// exist.
func (f *Fake) SetMembers(name string) []string { return f.sets.SetMembers(name) }

// AddSet creates a set with members, as other software would.
func (f *Fake) AddSet(name, typ, family string, members ...string) {
	f.sets.AddSet(name, typ, family, members...)
}
