package iptables

import (
	"fmt"
	"strings"

	"github.com/switchyard-proxy/switchyard/dataplane"
	"github.com/switchyard-proxy/switchyard/dataplane/conntrack"
	"github.com/switchyard-proxy/switchyard/dataplane/internal/sorted"
	"github.com/switchyard-proxy/switchyard/dataplane/xtables"
)

// Chain is one chain this mode owns: its table, name and rules. A rule is
// the text after "-A <chain> " in iptables-restore syntax.
type Chain struct {
	Table string
	Name  string
	Rules []string
}

// Jump is a rule this mode needs in a built-in chain (PREROUTING → our
// KUBE-SERVICES, …). Built-in chains are shared with other software, so
// jumps are ensured one by one instead of rewriting the chain.
type Jump struct {
	Table string
	Chain string
	Rule  string // ends with "-j <Target>"
	// Target is the owned chain the rule jumps to.
	Target string
}

// Ruleset is everything one family needs, rendered without I/O.
type Ruleset struct {
	Family dataplane.Family
	// Chains by table, then by name.
	Chains map[string]map[string]*Chain
	Jumps  []Jump
	Skips  []dataplane.Skip
	// HairpinSet is the ipset KUBE-POSTROUTING matches to masquerade an
	// endpoint reaching itself through a service.
	HairpinSet string
	// hairpin holds HairpinSet's members ("ip,proto:port,ip").
	hairpin map[string]struct{}
	// udp describes UDP service ports by id, for conntrack cleanup.
	udp map[string]conntrack.UDPPort
}

func newRuleset(f dataplane.Family) *Ruleset {
	return &Ruleset{Family: f, Chains: map[string]map[string]*Chain{
		tableFilter: {}, tableNAT: {},
	}, hairpin: map[string]struct{}{}, udp: map[string]conntrack.UDPPort{}}
}

func (r *Ruleset) addHairpin(member string) { r.hairpin[member] = struct{}{} }

// HairpinMembers returns the members of HairpinSet, sorted.
func (r *Ruleset) HairpinMembers() []string { return sorted.Keys(r.hairpin) }

// chain returns the named chain, creating it empty.
func (r *Ruleset) chain(table, name string) *Chain {
	c, ok := r.Chains[table][name]
	if !ok {
		c = &Chain{Table: table, Name: name}
		r.Chains[table][name] = c
	}
	return c
}

// add appends one rule built from args joined by spaces.
func (r *Ruleset) add(table, chain string, args ...string) {
	c := r.chain(table, chain)
	c.Rules = append(c.Rules, strings.Join(args, " "))
}

// Tables returns the table names in a stable order.
func (r *Ruleset) Tables() []string { return sorted.Keys(r.Chains) }

// ChainNames returns the chain names of a table, sorted.
func (r *Ruleset) ChainNames(table string) []string { return sorted.Keys(r.Chains[table]) }

// String renders the whole ruleset as iptables-restore input (for
// --noflush): tables sorted, chains declared and then filled in name order,
// followed by the jumps from built-in chains as comments.
func (r *Ruleset) String() string {
	var b strings.Builder
	for _, t := range r.Tables() {
		fmt.Fprintf(&b, "*%s\n", t)
		names := r.ChainNames(t)
		for _, n := range names {
			fmt.Fprintf(&b, ":%s - [0:0]\n", n)
		}
		for _, n := range names {
			for _, rule := range r.Chains[t][n].Rules {
				fmt.Fprintf(&b, "-A %s %s\n", n, rule)
			}
		}
		b.WriteString("COMMIT\n")
	}
	for _, j := range r.Jumps {
		fmt.Fprintf(&b, "# jump -t %s -A %s %s\n", j.Table, j.Chain, j.Rule)
	}
	// The set as ipset restore input, commented out: it is not
	// iptables-restore input (the e2e golden test feeds it to ipset).
	if r.HairpinSet != "" {
		fmt.Fprintf(&b, "# ipset %s\n", createSetLine(r.HairpinSet, r.Family))
		for _, m := range r.HairpinMembers() {
			fmt.Fprintf(&b, "# ipset add %s %s\n", r.HairpinSet, m)
		}
	}
	return b.String()
}

// builtinTargets are the targets a rule may use that are not chains.
var builtinTargets = map[string]bool{
	"ACCEPT": true, "DROP": true, "REJECT": true, "RETURN": true,
	"DNAT": true, "SNAT": true, "MASQUERADE": true, "MARK": true,
	"LOG": true, "CONNMARK": true,
}

var builtinChains = map[string][]string{
	tableNAT:    {"PREROUTING", "INPUT", "OUTPUT", "POSTROUTING"},
	tableFilter: {"INPUT", "FORWARD", "OUTPUT"},
}

// Validate checks that every -j/-g in the ruleset (chains and jumps)
// targets a chain of the same table or a built-in target, and that chain
// names fit iptables' limit.
func (r *Ruleset) Validate() error { return r.validate(nil) }

// validate checks the named chains (every chain when only is nil) and the
// jumps: a partial sync checks what it writes, in time that does not grow
// with the number of services.
func (r *Ruleset) validate(only map[string][]string) error {
	var errs []string
	check := func(table, where, rule string) {
		if set, ok := matchSet(rule); ok && (set == "" || set != r.HairpinSet) {
			errs = append(errs, fmt.Sprintf("%s/%s: match on set %q this ruleset does not create", table, where, set))
		}
		tgt := xtables.RuleTarget(rule)
		if tgt == "DNAT" && strings.Contains(rule, "--to-destination") && !strings.Contains(rule, "-p ") {
			// iptables refuses a DNAT to a port without a protocol match.
			errs = append(errs, fmt.Sprintf("%s/%s: DNAT without -p: %s", table, where, rule))
		}
		if tgt == "" || builtinTargets[tgt] {
			return
		}
		if _, ok := r.Chains[table][tgt]; !ok {
			errs = append(errs, fmt.Sprintf("%s/%s: jump to missing chain %s", table, where, tgt))
		}
	}
	for _, t := range r.Tables() {
		// Not ChainNames when only is set: sorting every chain name
		// was most of a partial sync's validation at 10,000 services.
		names := only[t]
		if only == nil {
			names = r.ChainNames(t)
		}
		for _, n := range names {
			c, ok := r.Chains[t][n]
			if !ok {
				continue
			}
			if len(n) > maxChainName {
				errs = append(errs, fmt.Sprintf("%s/%s: name longer than %d", t, n, maxChainName))
			}
			for _, rule := range c.Rules {
				check(t, n, rule)
			}
		}
	}
	for _, j := range r.Jumps {
		check(j.Table, j.Chain, j.Rule)
	}
	if len(errs) > 0 {
		return fmt.Errorf("invalid ruleset: %s", strings.Join(errs, "; "))
	}
	return nil
}

// matchSet returns the set a rule matches with -m set, ok false if none.
func matchSet(rule string) (string, bool) {
	_, rest, ok := strings.Cut(rule, "--match-set")
	if !ok {
		return "", false
	}
	f := strings.Fields(rest)
	if len(f) == 0 {
		return "", true
	}
	return f[0], true
}
