package iptables

import (
	"fmt"
	"sort"
	"strings"
)

// CleanupPayload returns the iptables-restore --noflush input that removes
// every chain owned reports true for and every jump to one from another
// chain, or "" when there is none. owned is the caller's policy: the
// IPVS mode passes its own prefix, so each mode removes only its chains.
// Declaring an owned chain flushes it first, so the owned chains may jump
// to each other and still be deleted in any order.
func CleanupPayload(saved map[string]*SavedTable, owned func(chain string) bool) string {
	tables := make([]string, 0, len(saved))
	for t := range saved {
		tables = append(tables, t)
	}
	sort.Strings(tables)
	var b strings.Builder
	for _, t := range tables {
		st := saved[t]
		var dels, ours []string
		for _, c := range st.chains {
			if owned(c) {
				ours = append(ours, c)
				continue
			}
			for _, r := range st.rules[c] {
				if owned(RuleTarget(r)) {
					dels = append(dels, fmt.Sprintf("-D %s %s", c, r))
				}
			}
		}
		if len(dels)+len(ours) == 0 {
			continue
		}
		fmt.Fprintf(&b, "*%s\n", t)
		for _, c := range ours {
			fmt.Fprintf(&b, ":%s - [0:0]\n", c)
		}
		for _, l := range dels {
			b.WriteString(l + "\n")
		}
		for _, c := range ours {
			fmt.Fprintf(&b, "-X %s\n", c)
		}
		b.WriteString("COMMIT\n")
	}
	return b.String()
}
