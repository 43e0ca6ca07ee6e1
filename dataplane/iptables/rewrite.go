package iptables

import (
	"fmt"
	"slices"
	"strings"

	"github.com/switchyard-proxy/switchyard/dataplane/xtables"
)

// Whole-table rewrite: on iptables-nft every --noflush restore that adds
// to a large table is slow (~130 ms at 5k services, plus a cost that is
// quadratic in the chains it declares), while one restore without
// --noflush that replaces the table is linear (5.3 s for 5k services ×
// 5 endpoints). A full sync that must write most chains therefore
// replaces nat and filter whole, rebuilt from the read-back it has just
// taken: every foreign chain and rule re-emitted verbatim, in order, and
// our chains from the new render.

// defaultRewriteAbove is the number of chains a full sync must write on
// nft before it replaces whole tables instead of writing batches.
const defaultRewriteAbove = 1000

// shouldRewrite reports whether a full sync with plan p replaces whole
// tables: the read-back is reproducible, the plan writes more than the
// threshold and at least a quarter of the rendered chains (below that,
// a few --noflush batches cost less than re-creating the table).
func shouldRewrite(p syncPlan, rs *Ruleset, opaque bool, above int) bool {
	if opaque || above < 0 || p.written <= above {
		return false
	}
	total := 0
	for _, chains := range rs.Chains {
		total += len(chains)
	}
	return 4*p.written >= total
}

// rewritePayload returns iptables-restore input, for a restore WITHOUT
// --noflush, that replaces each table of rs with:
//   - built-in chains with their read-back declaration (policy kept), or
//     ACCEPT when the table was not there yet;
//   - every chain we do not own, declared and filled verbatim in
//     read-back order, except rules that jump to an owned chain rs no
//     longer has (they would dangle);
//   - rs's jumps that were missing, at the top of their built-in chain
//     (where the --noflush path inserts them);
//   - our chains as rendered in rs.
//
// Owned chains the read-back holds and rs does not are left out, that is
// deleted. Tables rs does not name are not in the payload, so the restore
// leaves them alone. Filter comes first, with the rules of transitional
// (filter chain → rules) in place of rs's, then nat: the order and the
// first step of syncPlan.phases, whose last step the caller writes next.
func rewritePayload(saved map[string]*xtables.SavedTable, rs *Ruleset, transitional map[string][]string) string {
	var b strings.Builder
	for _, t := range []string{tableFilter, tableNAT} {
		st := saved[t]
		if st == nil {
			st = &xtables.SavedTable{}
		}
		var foreign []string
		for _, c := range builtinChains[t] {
			if !slices.Contains(st.Chains(), c) {
				foreign = append(foreign, c)
			}
		}
		for _, c := range st.Chains() {
			if !IsOwnedChain(c) {
				foreign = append(foreign, c)
			}
		}
		fmt.Fprintf(&b, "*%s\n", t)
		for _, c := range foreign {
			decl, ok := st.Decl(c)
			if !ok {
				decl = c + " ACCEPT [0:0]"
			}
			fmt.Fprintf(&b, ":%s\n", decl)
		}
		names := rs.ChainNames(t)
		for _, n := range names {
			fmt.Fprintf(&b, ":%s - [0:0]\n", n)
		}
		for _, c := range foreign {
			writeForeignRules(&b, rs, t, c, st.Rules(c))
		}
		for _, n := range names {
			rules, ok := transitional[n]
			if !ok || t != tableFilter {
				rules = rs.Chains[t][n].Rules
			}
			for _, r := range rules {
				fmt.Fprintf(&b, "-A %s %s\n", n, r)
			}
		}
		b.WriteString("COMMIT\n")
	}
	return b.String()
}

// writeForeignRules emits chain c of table t: missing jumps of rs first,
// then the read-back rules verbatim minus dangling jumps to owned chains.
func writeForeignRules(b *strings.Builder, rs *Ruleset, t, c string, saved []string) {
	for _, j := range rs.Jumps {
		if j.Table != t || j.Chain != c {
			continue
		}
		if !slices.ContainsFunc(saved, func(r string) bool { return xtables.IsOwnJump(r) && xtables.RuleTarget(r) == j.Target }) {
			fmt.Fprintf(b, "-A %s %s\n", c, j.Rule)
		}
	}
	for _, r := range saved {
		if tgt := xtables.RuleTarget(r); IsOwnedChain(tgt) && rs.Chains[t][tgt] == nil {
			continue
		}
		fmt.Fprintf(b, "-A %s %s\n", c, r)
	}
}
