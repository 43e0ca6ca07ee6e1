package xtables

import (
	"bufio"
	"bytes"
	"iter"
	"maps"
	"strings"
)

// SavedTable is one table parsed from iptables-save output. The iptables
// and IPVS modes both read their chains back through it, so they parse the
// same way. The zero value is an empty table.
type SavedTable struct {
	chains []string            // in output order, built-ins included
	decls  map[string]string   // by chain: declaration after ":" ("INPUT DROP [0:0]")
	rules  map[string][]string // by chain: rule text after "-A <chain> "
}

// Chains returns the table's declared chains in output order, built-ins
// included.
func (t *SavedTable) Chains() []string { return t.chains }

// Rules returns a chain's rules as after "-A <chain> ", nil for none.
// The slice is the table's: callers must not modify it.
func (t *SavedTable) Rules(chain string) []string { return t.rules[chain] }

// Decl returns a chain's declaration as after ":" ("INPUT DROP [0:0]",
// "KUBE-SERVICES - [0:0]"), ok false when the table does not declare it.
func (t *SavedTable) Decl(chain string) (decl string, ok bool) {
	decl, ok = t.decls[chain]
	return decl, ok
}

// AllRules yields every chain that has rules, with its rules, in no set
// order. Unlike Chains it includes a chain the output appends to without
// declaring it.
func (t *SavedTable) AllRules() iter.Seq2[string, []string] { return maps.All(t.rules) }

// Builtin reports whether chain is a built-in chain of the table (its
// declaration carries a policy instead of "-").
func (t *SavedTable) Builtin(chain string) bool {
	f := strings.Fields(t.decls[chain])
	return len(f) >= 2 && f[1] != "-"
}

// ParseSave parses iptables-save output into tables by name. opaque is
// set when the output holds something this parser cannot reproduce: a
// table iptables-nft-save calls incompatible (it prints only a comment
// for it, no rules) or a line of unknown syntax. Such a read-back must
// never be written back as a whole table.
func ParseSave(out []byte) (tables map[string]*SavedTable, opaque bool) {
	tables = map[string]*SavedTable{}
	var cur *SavedTable
	sc := bufio.NewScanner(bytes.NewReader(out))
	sc.Buffer(make([]byte, 0, 64*1024), 16*1024*1024)
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "#"):
			if strings.Contains(line, "incompatible") {
				opaque = true
			}
		case strings.HasPrefix(line, "*"):
			cur = &SavedTable{decls: map[string]string{}, rules: map[string][]string{}}
			tables[line[1:]] = cur
		case cur == nil:
			if strings.TrimSpace(line) != "" {
				opaque = true
			}
		case strings.HasPrefix(line, ":"):
			name, _, _ := strings.Cut(line[1:], " ")
			cur.chains = append(cur.chains, name)
			cur.decls[name] = line[1:]
		case strings.HasPrefix(line, "-A "):
			chain, rule, _ := strings.Cut(line[3:], " ")
			cur.rules[chain] = append(cur.rules[chain], rule)
		case line == "COMMIT":
		default:
			opaque = true
		}
	}
	return tables, opaque
}
