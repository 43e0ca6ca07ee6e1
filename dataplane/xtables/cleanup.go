package xtables

import (
	"fmt"
	"slices"
	"strings"

	"github.com/switchyard-proxy/switchyard/dataplane/internal/sorted"
)

// Ownership says which chains, jumps and rules of a read-back are a
// mode's, so that its cleanup removes those and nothing else.
type Ownership struct {
	// Chain reports the chains the mode removes.
	Chain func(name string) bool
	// Exclusive reports the chains only this mode ever creates or jumps
	// to: a jump to one is the mode's own rule wherever it stands. A jump
	// to another owned chain is the mode's only in a built-in chain; a
	// foreign chain's jump (a CNI plugin using KUBE-MARK-MASQ, say) is
	// left, and its target is emptied but kept so that the rule stays
	// valid. nil: none.
	Exclusive func(name string) bool
	// Sets reports the ipsets only this mode creates: a rule matching one
	// (-m set --match-set NAME) is the mode's own wherever it stands, and
	// goes before the sets are destroyed. nil: none.
	Sets func(name string) bool
	// Jump reports the mode's own rules in built-in chains whatever they
	// jump to: where kube-proxy runs and shares a chain's name, the
	// mode's jump to it goes and kube-proxy's stays. nil: none.
	Jump func(rule string) bool
}

// Cleanup is what CleanupPayload plans for one read-back.
type Cleanup struct {
	// Payload is the iptables-restore --noflush input; "" when the
	// read-back holds nothing of the mode.
	Payload string
	// Deleted and Kept name the owned chains as "table/chain": Kept ones
	// are emptied but stay, because a foreign rule jumps to them.
	Deleted, Kept []string
	// Rules counts the rules deleted from chains that are not the mode's.
	Rules int
}

// CleanupPayload plans the removal of what o owns from a read-back:
// every owned chain, the mode's rules in other chains (see Ownership),
// and nothing else. Declaring an owned chain flushes it first, so owned
// chains may jump to each other and still be deleted in any order; each
// table commits atomically.
func CleanupPayload(saved map[string]*SavedTable, o Ownership) Cleanup {
	var c Cleanup
	var b strings.Builder
	for _, t := range sorted.Keys(saved) {
		p := planCleanup(saved[t], o)
		for _, ch := range p.empty {
			c.Kept = append(c.Kept, t+"/"+ch)
		}
		if len(p.owned)+len(p.dels) == 0 {
			continue
		}
		var remove []string
		for _, ch := range p.owned {
			if p.kept[ch] {
				c.Kept = append(c.Kept, t+"/"+ch)
				continue
			}
			remove = append(remove, ch)
			c.Deleted = append(c.Deleted, t+"/"+ch)
		}
		WriteTableCleanup(&b, t, p.owned, p.dels, remove)
		c.Rules += len(p.dels)
	}
	c.Payload = b.String()
	return c
}

// WriteTableCleanup writes one table's block of iptables-restore
// --noflush input that removes chains and rules: declaring each chain of
// flush empties it, so that no rule in them refers to another chain any
// more; then the rules of dels ("-D <chain> <rule>", in chains that
// stay) go, and last the chains of remove (a subset of flush). The table
// commits atomically.
func WriteTableCleanup(b *strings.Builder, table string, flush, dels, remove []string) {
	fmt.Fprintf(b, "*%s\n", table)
	for _, ch := range flush {
		fmt.Fprintf(b, ":%s - [0:0]\n", ch)
	}
	for _, l := range dels {
		b.WriteString(l + "\n")
	}
	for _, ch := range remove {
		fmt.Fprintf(b, "-X %s\n", ch)
	}
	b.WriteString("COMMIT\n")
}

// tableCleanup is the plan of one table.
type tableCleanup struct {
	owned []string        // owned chains, in read-back order
	dels  []string        // "-D <chain> <rule>" in chains not owned
	kept  map[string]bool // owned chains a foreign rule jumps to
	empty []string        // kept chains that are empty already
}

func planCleanup(st *SavedTable, o Ownership) tableCleanup {
	p := tableCleanup{kept: map[string]bool{}}
	for _, ch := range st.chains {
		if o.Chain(ch) {
			p.owned = append(p.owned, ch)
			continue
		}
		for _, r := range st.rules[ch] {
			tgt := RuleTarget(r)
			switch {
			case o.matchesSet(r), o.Chain(tgt) && (st.Builtin(ch) || o.exclusive(tgt)), st.Builtin(ch) && o.jump(r):
				p.dels = append(p.dels, fmt.Sprintf("-D %s %s", ch, r))
			case o.Chain(tgt):
				p.kept[tgt] = true
			}
		}
	}
	// A kept chain that is already empty needs nothing: a second cleanup
	// writes nothing.
	p.owned = slices.DeleteFunc(p.owned, func(ch string) bool {
		if p.kept[ch] && len(st.rules[ch]) == 0 {
			p.empty = append(p.empty, ch)
			return true
		}
		return false
	})
	return p
}

func (o Ownership) exclusive(chain string) bool { return o.Exclusive != nil && o.Exclusive(chain) }

func (o Ownership) jump(rule string) bool { return o.Jump != nil && o.Jump(rule) }

// matchesSet reports whether a rule matches one of o's sets.
func (o Ownership) matchesSet(rule string) bool {
	if o.Sets == nil {
		return false
	}
	f := strings.Fields(rule)
	for i := 0; i+1 < len(f); i++ {
		if f[i] == "--match-set" && o.Sets(f[i+1]) {
			return true
		}
	}
	return false
}

// OwnJumpPrefix starts the comment of every jump a Switchyard mode
// inserts into a built-in chain; kube-proxy's jumps carry the rest of the
// text alone (dataplane/iptables, names.go, says why they differ).
const OwnJumpPrefix = "switchyard: "

// IsOwnJump reports whether a rule, as iptables-save prints it, is a
// Switchyard mode's jump (OwnJumpPrefix).
func IsOwnJump(rule string) bool { return strings.Contains(rule, `--comment "`+OwnJumpPrefix) }

// KubeProxyCanary is the chain kube-proxy's iptables and ipvs modes keep
// in mangle, nat and filter on every sync (kubeproxycleanup knows it as
// its evidence too). No Switchyard mode creates it.
const KubeProxyCanary = "KUBE-PROXY-CANARY"

// HasKubeProxy reports whether a read-back holds kube-proxy's canary:
// kube-proxy runs (or ran) with this back end and family, so chains under
// the names a mode shares with it may be kube-proxy's.
func HasKubeProxy(saved map[string]*SavedTable) bool {
	for _, t := range saved {
		if slices.Contains(t.chains, KubeProxyCanary) {
			return true
		}
	}
	return false
}
