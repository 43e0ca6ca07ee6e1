package iptables

import (
	"bufio"
	"bytes"
	"strings"
)

// savedTable is one table parsed from iptables-save output.
type savedTable struct {
	chains []string            // in output order, built-ins included
	rules  map[string][]string // by chain: rule text after "-A <chain> "
}

// parseSave parses iptables-save output into tables by name.
func parseSave(out []byte) map[string]*savedTable {
	tables := map[string]*savedTable{}
	var cur *savedTable
	sc := bufio.NewScanner(bytes.NewReader(out))
	sc.Buffer(make([]byte, 0, 64*1024), 16*1024*1024)
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "*"):
			cur = &savedTable{rules: map[string][]string{}}
			tables[line[1:]] = cur
		case cur == nil:
		case strings.HasPrefix(line, ":"):
			name, _, _ := strings.Cut(line[1:], " ")
			cur.chains = append(cur.chains, name)
		case strings.HasPrefix(line, "-A "):
			chain, rule, _ := strings.Cut(line[3:], " ")
			cur.rules[chain] = append(cur.rules[chain], rule)
		}
	}
	return tables
}
