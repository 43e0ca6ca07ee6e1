package ipvs

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/switchyard-proxy/switchyard/dataplane/iptables"
)

// The fixed rules are written with iptables-restore --noflush and read back
// with iptables-save: only our chains and the jumps to them are touched.

func binary(fam Family, fl iptables.Flavour, cmd string) string {
	base := "iptables"
	if fam == IPv6 {
		base = "ip6tables"
	}
	if fl != iptables.FlavourAuto {
		base += "-" + string(fl)
	}
	return base + "-" + cmd
}

// savedTables is the part of iptables-save this mode needs: every rule by
// table and chain, chains in order.
type savedTables map[string]map[string][]string

func (d *Dataplane) saveRules(ctx context.Context, fam Family) (savedTables, error) {
	out, err := d.cfg.Runner.Run(ctx, []string{binary(fam, d.flavour, "save")}, nil)
	if err != nil {
		return nil, fmt.Errorf("%s read back: %w", fam, err)
	}
	return parseSave(out), nil
}

func parseSave(out []byte) savedTables {
	st := savedTables{}
	var cur map[string][]string
	sc := bufio.NewScanner(bytes.NewReader(out))
	sc.Buffer(make([]byte, 0, 64*1024), 16<<20)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		switch {
		case strings.HasPrefix(line, "*"):
			cur = map[string][]string{}
			st[line[1:]] = cur
		case cur == nil:
		case strings.HasPrefix(line, ":"):
			name, _, _ := strings.Cut(line[1:], " ")
			if _, ok := cur[name]; !ok {
				cur[name] = nil
			}
		case strings.HasPrefix(line, "-A "):
			name, rule, _ := strings.Cut(line[3:], " ")
			cur[name] = append(cur[name], rule)
		}
	}
	return st
}

// ours extracts our chains and jumps from a read-back.
func (st savedTables) ours() ruleset {
	rs := newRuleset()
	for t, chains := range st {
		if rs.chains[t] == nil {
			rs.chains[t] = map[string][]string{}
		}
		for c, rules := range chains {
			if isOwnedChain(c) {
				rs.chains[t][c] = rules
				continue
			}
			for _, r := range rules {
				if tgt := ruleTarget(r); isOwnedChain(tgt) {
					rs.jumps[jump{table: t, chain: c, target: tgt}.key()] = true
				}
			}
		}
	}
	return rs
}

func ruleTarget(rule string) string {
	f := strings.Fields(rule)
	for i := 0; i+1 < len(f); i++ {
		if f[i] == "-j" || f[i] == "-g" {
			return f[i+1]
		}
	}
	return ""
}

// canonRule is a rule as its option groups, sorted: iptables-save may
// order matches and quote comments differently from how they were
// written. A false "different" only costs a rewrite of our few chains.
func canonRule(rule string) string {
	var groups []string
	var cur []string
	neg := false
	for _, tok := range strings.Fields(strings.ReplaceAll(rule, `"`, "")) {
		switch {
		case tok == "!":
			neg = true
			continue
		case strings.HasPrefix(tok, "-") && !isNumber(tok):
			if len(cur) > 0 {
				groups = append(groups, strings.Join(cur, " "))
			}
			cur = nil
			if neg {
				cur = append(cur, "!")
			}
		case neg:
			cur = append(cur, "!")
		}
		neg = false
		cur = append(cur, tok)
	}
	if len(cur) > 0 {
		groups = append(groups, strings.Join(cur, " "))
	}
	slices.Sort(groups)
	return strings.Join(groups, " | ")
}

func isNumber(s string) bool {
	return len(s) > 1 && s[0] == '-' && s[1] >= '0' && s[1] <= '9'
}

func sameRules(a, b []string) bool {
	return slices.EqualFunc(a, b, func(x, y string) bool { return canonRule(x) == canonRule(y) })
}

// rulesPayload returns the iptables-restore --noflush input that makes
// have into want: changed or missing chains rewritten whole, unwanted
// ones of ours deleted, missing jumps inserted at the top. "" when equal.
func rulesPayload(have, want ruleset) string {
	var b strings.Builder
	for _, t := range []string{"filter", "nat"} {
		var write, remove []string
		for _, c := range sortedKeys(want.chains[t]) {
			if got, ok := have.chains[t][c]; !ok || !sameRules(got, want.chains[t][c]) {
				write = append(write, c)
			}
		}
		for _, c := range sortedKeys(have.chains[t]) {
			if _, ok := want.chains[t][c]; !ok {
				remove = append(remove, c)
			}
		}
		var jumps []jump
		for _, j := range fixedJumps {
			if j.table == t && want.jumps[j.key()] && !have.jumps[j.key()] {
				jumps = append(jumps, j)
			}
		}
		if len(write)+len(remove)+len(jumps) == 0 {
			continue
		}
		fmt.Fprintf(&b, "*%s\n", t)
		for _, c := range append(slices.Clone(write), remove...) {
			fmt.Fprintf(&b, ":%s - [0:0]\n", c)
		}
		for _, c := range write {
			for _, r := range want.chains[t][c] {
				fmt.Fprintf(&b, "-A %s %s\n", c, r)
			}
		}
		for _, c := range remove {
			fmt.Fprintf(&b, "-X %s\n", c)
		}
		for _, j := range jumps {
			fmt.Fprintf(&b, "-I %s 1 %s\n", j.chain, j.rule)
		}
		b.WriteString("COMMIT\n")
	}
	return b.String()
}

// cleanupRulesPayload removes every jump to our chains, then the chains.
func cleanupRulesPayload(st savedTables) string {
	var b strings.Builder
	for _, t := range sortedKeys(st) {
		var dels, owned []string
		for _, c := range sortedKeys(st[t]) {
			if isOwnedChain(c) {
				owned = append(owned, c)
				continue
			}
			for _, r := range st[t][c] {
				if isOwnedChain(ruleTarget(r)) {
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

func (d *Dataplane) restoreRules(ctx context.Context, fam Family, payload string) error {
	if payload == "" {
		return nil
	}
	argv := []string{binary(fam, d.flavour, "restore"), "-w", "--noflush"}
	if _, err := d.cfg.Runner.Run(ctx, argv, []byte(payload)); err != nil {
		return fmt.Errorf("%s restore: %w", fam, err)
	}
	d.stats.IPTablesRestores++
	return nil
}

func cloneRuleset(rs ruleset) ruleset {
	c := newRuleset()
	for t, chains := range rs.chains {
		c.chains[t] = map[string][]string{}
		for n, rules := range chains {
			c.chains[t][n] = slices.Clone(rules)
		}
	}
	for j := range rs.jumps {
		c.jumps[j] = true
	}
	return c
}
