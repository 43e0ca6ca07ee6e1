package xtables

import "strings"

// RuleTarget returns the chain or target after -j or -g (or their long
// spellings), "" if none.
func RuleTarget(rule string) string {
	f := strings.Fields(rule)
	for i := 0; i+1 < len(f); i++ {
		if f[i] == "-j" || f[i] == "-g" || f[i] == "--jump" || f[i] == "--goto" {
			return f[i+1]
		}
	}
	return ""
}
