package iptablestest

import (
	"fmt"
	"strings"

	"github.com/switchyard-proxy/switchyard/dataplane/xtables"
)

// Flushed counts what "iptables -t TABLE -F" takes from the chains owned
// reports as its own, given st saved before the flush: owned chains that
// held rules, and jumps into owned chains from chains it does not own.
// The drift check reports each of them as a missing rule. owned is
// iptables.IsOwnedChain; a parameter because this package may not
// import the mode it fakes the kernel for.
func Flushed(st *xtables.SavedTable, owned func(chain string) bool) (ownedWithRules, jumps int) {
	for _, c := range st.Chains() {
		for _, r := range st.Rules(c) {
			if !owned(c) && owned(xtables.RuleTarget(r)) {
				jumps++
			}
		}
		if owned(c) && len(st.Rules(c)) > 0 {
			ownedWithRules++
		}
	}
	return ownedWithRules, jumps
}

// Unhook returns the restore lines ("-D CHAIN RULE\n") that delete every
// rule of st jumping to target, which a user must run before deleting
// the chain target, and how many chains held such a rule.
func Unhook(st *xtables.SavedTable, target string) (lines string, chains int) {
	var b strings.Builder
	for _, c := range st.Chains() {
		n := 0
		for _, r := range st.Rules(c) {
			if xtables.RuleTarget(r) == target {
				fmt.Fprintf(&b, "-D %s %s\n", c, r)
				n++
			}
		}
		chains += min(n, 1)
	}
	return b.String(), chains
}
