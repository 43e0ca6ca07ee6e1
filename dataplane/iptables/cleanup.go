package iptables

import (
	"fmt"
	"sort"
	"strings"
)

// cleanupPayload returns the restore input that removes every owned chain
// and every jump to one from a foreign chain, or "" when there is none.
func cleanupPayload(saved map[string]*savedTable) string {
	tables := make([]string, 0, len(saved))
	for t := range saved {
		tables = append(tables, t)
	}
	sort.Strings(tables)
	var b strings.Builder
	for _, t := range tables {
		st := saved[t]
		var dels, owned []string
		for _, c := range st.chains {
			if IsOwnedChain(c) {
				owned = append(owned, c)
				continue
			}
			for _, r := range st.rules[c] {
				if IsOwnedChain(ruleTarget(r)) {
					dels = append(dels, fmt.Sprintf("-D %s %s", c, r))
				}
			}
		}
		if len(dels)+len(owned) == 0 {
			continue
		}
		fmt.Fprintf(&b, "*%s\n", t)
		for _, c := range owned {
			fmt.Fprintf(&b, ":%s - [0:0]\n", c)
		}
		for _, l := range dels {
			b.WriteString(l + "\n")
		}
		for _, c := range owned {
			fmt.Fprintf(&b, "-X %s\n", c)
		}
		b.WriteString("COMMIT\n")
	}
	return b.String()
}
