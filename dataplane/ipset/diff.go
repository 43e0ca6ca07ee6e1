package ipset

import (
	"fmt"
	"sort"
	"strings"
)

// Changes is the restore input that brings one set from the members it
// has to the members wanted, split in two so that a mode can put its rule
// changes in between: members are added before any rule DNATs or matches
// on them, and deleted only once no rule needs them.
type Changes struct {
	Pre            string // the create line when the set is missing, then adds
	Post           string // dels
	Added, Removed int
}

// Diff returns the Changes that turn have into want for the set s, with
// its create line first when create is set. Members are keys; the map
// values are ignored (the modes keep members as map[string]bool or
// map[string]struct{}).
func Diff[V any](s Spec, have, want map[string]V, create bool) Changes {
	var pre, post strings.Builder
	if create {
		pre.WriteString(s.CreateLine() + "\n")
	}
	// Only the differences are sorted: a partial sync at 25,000 members
	// must not sort them all.
	adds, dels := missing(want, have), missing(have, want)
	for _, m := range adds {
		fmt.Fprintf(&pre, "add %s %s\n", s.Name, m)
	}
	for _, m := range dels {
		fmt.Fprintf(&post, "del %s %s\n", s.Name, m)
	}
	return Changes{Pre: pre.String(), Post: post.String(), Added: len(adds), Removed: len(dels)}
}

// missing returns the keys of a that b lacks, sorted.
func missing[V any](a, b map[string]V) []string {
	var out []string
	for m := range a {
		if _, ok := b[m]; !ok {
			out = append(out, m)
		}
	}
	sort.Strings(out)
	return out
}
