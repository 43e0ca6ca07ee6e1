package iptables

import (
	"bufio"
	"bytes"
	"strings"
)

// SavedTable is one table parsed from iptables-save output. The IPVS mode
// reads its own chains back through it, so both modes parse the same way.
type SavedTable struct {
	chains []string            // in output order, built-ins included
	decls  map[string]string   // by chain: declaration after ":" ("INPUT DROP [0:0]")
	rules  map[string][]string // by chain: rule text after "-A <chain> "
}

// Chains returns the table's declared chains in output order, built-ins
// included.
func (t *SavedTable) Chains() []string { return t.chains }

// Rules returns a chain's rules as after "-A <chain> ", nil for none.
func (t *SavedTable) Rules(chain string) []string { return t.rules[chain] }

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
