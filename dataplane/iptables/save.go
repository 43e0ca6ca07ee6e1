package iptables

import (
	"bufio"
	"bytes"
	"strings"
)

// savedTable is one table parsed from iptables-save output.
type savedTable struct {
	chains []string            // in output order, built-ins included
	decls  map[string]string   // by chain: declaration after ":" ("INPUT DROP [0:0]")
	rules  map[string][]string // by chain: rule text after "-A <chain> "
}

// parseSave parses iptables-save output into tables by name. opaque is
// set when the output holds something this parser cannot reproduce: a
// table iptables-nft-save calls incompatible (it prints only a comment
// for it, no rules) or a line of unknown syntax. Such a read-back must
// never be written back as a whole table.
func parseSave(out []byte) (tables map[string]*savedTable, opaque bool) {
	tables = map[string]*savedTable{}
	var cur *savedTable
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
			cur = &savedTable{decls: map[string]string{}, rules: map[string][]string{}}
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
