package nftables

import (
	"reflect"
	"slices"

	"github.com/google/nftables/expr"
	"sigs.k8s.io/knftables"
)

// Rules in a comparable form. A rendered rule is text with, for most,
// a typed form (rule.go); a kernel rule is expressions. Two comparisons:
//
//   - a rule with a form (every per-service rule but fib and prefix
//     matches) is compared exactly: its form gives the expressions nft
//     generates for its text and the kernel's must be equal, but for the
//     register ranges of a nat expression, which the kernel fills in
//     (max = min) when left out;
//   - any other rule (the fixed chains: ct state, fib, reject, mark,
//     masquerade, verdict-map lookups on concatenations) by what it
//     references: the sets it looks up or updates and the chains it
//     jumps or goes to, so a rule replaced by one that sends packets
//     elsewhere is seen; one changed in a match only is not.
//
// Every chain's rule count is compared too, so a flushed chain, a
// deleted rule and a rule someone added to a chain of ours all count.

// sameRules reports whether a chain's kernel rules are the rendered ones.
func sameRules(want []Rule, got []kernelRule) bool {
	if len(want) != len(got) {
		return false
	}
	for i := range want {
		if !sameRule(&want[i], got[i]) {
			return false
		}
	}
	return true
}

func sameRule(want *Rule, got kernelRule) bool {
	if ex, ok := want.exprs(); ok {
		return sameExprs(ex, got.exprs)
	}
	var sets, chains []string
	want.refs(func(n string) { chains = append(chains, n) }, func(n string) { sets = append(sets, n) })
	gotSets, gotChains := exprRefs(got.exprs)
	slices.Sort(sets)
	slices.Sort(chains)
	return slices.Equal(sets, gotSets) && slices.Equal(chains, gotChains)
}

func sameExprs(want []expr.Any, got []any) bool {
	if len(want) != len(got) {
		return false
	}
	for i := range want {
		if !reflect.DeepEqual(normalExpr(want[i]), normalExpr(got[i])) {
			return false
		}
	}
	return true
}

// normalExpr drops what the kernel adds to what nft sends: a nat
// expression's register ranges are dumped with max = min.
func normalExpr(e any) any {
	if n, ok := e.(*expr.NAT); ok {
		c := *n
		if c.RegAddrMax == c.RegAddrMin {
			c.RegAddrMax = 0
		}
		if c.RegProtoMax == c.RegProtoMin {
			c.RegProtoMax = 0
		}
		return &c
	}
	return e
}

// exprRefs returns the sets and chains a kernel rule names, sorted.
func exprRefs(exprs []any) (sets, chains []string) {
	for _, e := range exprs {
		switch e := e.(type) {
		case *expr.Lookup:
			sets = append(sets, e.SetName)
		case *expr.Dynset:
			sets = append(sets, e.SetName)
		case *expr.FlowOffload:
			// "flow add @name" names its flowtable as a set reference.
			sets = append(sets, e.Name)
		case *expr.Verdict:
			if e.Chain != "" {
				chains = append(chains, e.Chain)
			}
		}
	}
	slices.Sort(sets)
	slices.Sort(chains)
	return sets, chains
}

// baseOf is "type hook priority" of a rendered base chain, as
// kernelBase spells the kernel's; "" for a regular chain.
func baseOf(c *Chain) string {
	if c.Hook == "" {
		return ""
	}
	return baseString(c.Type, c.Hook, c.Priority)
}

func baseString(t knftables.BaseChainType, h knftables.BaseChainHook, p knftables.BaseChainPriority) string {
	prio := string(p)
	if n, ok := namedPriorities[p]; ok {
		prio = n
	}
	return string(t) + " " + string(h) + " " + prio
}

// namedPriorities are the standard priority names of the ip and ip6
// families, which the kernel stores as numbers.
var namedPriorities = map[knftables.BaseChainPriority]string{
	knftables.RawPriority: "-300", knftables.ManglePriority: "-150", knftables.DNATPriority: "-100",
	knftables.FilterPriority: "0", knftables.SecurityPriority: "50", knftables.SNATPriority: "100",
}
