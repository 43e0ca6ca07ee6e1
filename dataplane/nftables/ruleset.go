package nftables

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"sigs.k8s.io/knftables"

	"github.com/switchyard-proxy/switchyard/dataplane"
	"github.com/switchyard-proxy/switchyard/dataplane/conntrack"
	"github.com/switchyard-proxy/switchyard/dataplane/internal/sorted"
)

// Chain is one chain of the table: a base chain when Hook is set.
type Chain struct {
	Name     string
	Type     knftables.BaseChainType
	Hook     knftables.BaseChainHook
	Priority knftables.BaseChainPriority
	Rules    []Rule
}

// Set is a named set or, with Map, a named map. Dynamic sets (affinity)
// are filled by the packet path: Apply never flushes them.
type Set struct {
	Name string
	Map  bool
	// Type or TypeOf (an expression, for keys that have no type name,
	// such as numgen's integer), not both.
	Type    string
	TypeOf  string
	Flags   []knftables.SetFlag
	Timeout time.Duration
	Dynamic bool
}

// Ruleset is the whole content of one family's table as Render computed
// it. Elements maps a set or map name to its elements: key (parts joined
// with " . ") → value ("" in sets).
type Ruleset struct {
	Family   dataplane.Family
	Chains   map[string]*Chain
	Sets     map[string]*Set
	Elements map[string]map[string]string
	Skips    []dataplane.Skip
	// Flowtable names the table's flowtable, "" for none (flowtable.go).
	// Its devices are not part of the ruleset: they follow the node's
	// interfaces, in a transaction of their own.
	Flowtable string

	udp map[string]conntrack.UDPPort
	// blocks names the chains that own a block of an endpoint map.
	blocks map[string]bool
}

func newRuleset(f dataplane.Family) *Ruleset {
	return &Ruleset{Family: f, Chains: map[string]*Chain{}, Sets: map[string]*Set{},
		Elements: map[string]map[string]string{}, udp: map[string]conntrack.UDPPort{}, blocks: map[string]bool{}}
}

// chain returns the chain name, creating it empty.
func (rs *Ruleset) chain(name string) *Chain {
	c, ok := rs.Chains[name]
	if !ok {
		c = &Chain{Name: name}
		rs.Chains[name] = c
	}
	return c
}

// add appends a rule of the netlink grammar (rule.go), made of terms.
func (rs *Ruleset) add(chain string, ts ...term) {
	c := rs.chain(chain)
	c.Rules = append(c.Rules, newRule(rs.Family, ts...))
}

// addText appends a rule only nft writes, made of parts joined by spaces.
func (rs *Ruleset) addText(chain string, parts ...string) {
	c := rs.chain(chain)
	c.Rules = append(c.Rules, textRule(strings.Join(parts, " ")))
}

func (rs *Ruleset) set(s *Set) {
	rs.Sets[s.Name] = s
	if _, ok := rs.Elements[s.Name]; !ok && !s.Dynamic {
		rs.Elements[s.Name] = map[string]string{}
	}
}

// element adds one element; value is "" for a set. The set may be
// declared elsewhere (a fragment adds to the fixed maps).
func (rs *Ruleset) element(set, value string, key ...string) {
	m := rs.Elements[set]
	if m == nil {
		m = map[string]string{}
		rs.Elements[set] = m
	}
	m[strings.Join(key, " . ")] = value
}

// Validate checks that every goto/jump (in rules and map values) names a
// chain of the ruleset and every @reference a set or map of it, so a
// transaction never fails on a dangling reference.
func (rs *Ruleset) Validate() error {
	hasChain := func(n string) bool { _, ok := rs.Chains[n]; return ok }
	hasSet := func(n string) bool { _, ok := rs.Sets[n]; return ok || (n == rs.Flowtable && n != "") }
	return errors.Join(rs.checkAllRefs(hasChain, hasSet)...)
}

// checkAllRefs checks the references of every rule and element of rs,
// and that every set holding elements exists, against the chains and
// sets hasChain and hasSet know (rs's own for Validate; with the applied
// ruleset's as well for a fragment, see validateIn).
func (rs *Ruleset) checkAllRefs(hasChain, hasSet func(string) bool) []error {
	var errs []error
	for _, n := range sorted.Keys(rs.Chains) {
		for i := range rs.Chains[n].Rules {
			errs = append(errs, checkRule("chain "+n, &rs.Chains[n].Rules[i], hasChain, hasSet)...)
		}
	}
	// Elements in map order, their errors sorted after: a maglev service
	// has thousands of elements, and sorting every key of every set was
	// a third of a render's CPU for errors that almost never exist.
	var elemErrs []error
	for n, elems := range rs.Elements {
		if !hasSet(n) {
			elemErrs = append(elemErrs, fmt.Errorf("elements of missing set %s", n))
		}
		for k, v := range elems {
			elemErrs = append(elemErrs, checkRefs(func() string { return "element " + n + " { " + k + " }" }, v, hasChain, hasSet)...)
		}
	}
	slices.SortFunc(elemErrs, func(a, b error) int { return strings.Compare(a.Error(), b.Error()) })
	return append(errs, elemErrs...)
}

// checkRule is checkRefs for a rule, reading its form, not its text.
func checkRule(where string, r *Rule, hasChain, hasSet func(string) bool) []error {
	var errs []error
	r.refs(func(n string) {
		if !hasChain(n) {
			errs = append(errs, fmt.Errorf("%s: jump to missing chain %s", where, n))
		}
	}, func(n string) {
		if !hasSet(n) {
			errs = append(errs, fmt.Errorf("%s: reference to missing set %s", where, n))
		}
	})
	return errs
}

// checkRefs checks the chain and set names a text (an element's value,
// a text-only rule) references; where names it in an error, and is
// called only for one (elements are checked by the million).
func checkRefs(where func() string, text string, hasChain, hasSet func(string) bool) []error {
	var errs []error
	for _, n := range chainRefs(text) {
		if !hasChain(n) {
			errs = append(errs, fmt.Errorf("%s: jump to missing chain %s", where(), n))
		}
	}
	for _, n := range setRefs(text) {
		if !hasSet(n) {
			errs = append(errs, fmt.Errorf("%s: reference to missing set %s", where(), n))
		}
	}
	return errs
}

// chainRefs returns the names after each "goto " and "jump " that starts
// a word. A scan, not a regular expression: every rule of every rendered
// service is checked, and the regexp was 14 % of a first sync's CPU.
func chainRefs(text string) []string {
	var out []string
	for i := 0; i < len(text); {
		j := strings.IndexByte(text[i:], ' ')
		if j < 0 {
			break
		}
		at := i + j
		if at-4 >= i {
			w := text[at-4 : at]
			if (w == "goto" || w == "jump") && (at == 4 || !isWordByte(text[at-5])) {
				end := at + 1
				for end < len(text) && text[end] != ' ' {
					end++
				}
				if end > at+1 {
					// Matches do not overlap: the name is consumed.
					out = append(out, text[at+1:end])
					i = end
					continue
				}
			}
		}
		i = at + 1
	}
	return out
}

// setRefs returns the names after each "@", up to a space, "," or "}".
func setRefs(text string) []string {
	var out []string
	for i := 0; i < len(text); {
		j := strings.IndexByte(text[i:], '@')
		if j < 0 {
			break
		}
		start := i + j + 1
		end := start
		for end < len(text) && text[end] != ' ' && text[end] != ',' && text[end] != '}' {
			end++
		}
		if end > start {
			out = append(out, text[start:end])
		}
		i = end
	}
	return out
}

func isWordByte(b byte) bool {
	return b == '_' || (b >= '0' && b <= '9') || (b >= 'a' && b <= 'z') || (b >= 'A' && b <= 'Z')
}

// knftables objects.

func (c *Chain) object() *knftables.Chain {
	ch := &knftables.Chain{Name: c.Name}
	if c.Hook != "" {
		ch.Type, ch.Hook, ch.Priority = knftables.PtrTo(c.Type), knftables.PtrTo(c.Hook), knftables.PtrTo(c.Priority)
	}
	return ch
}

func (s *Set) object() knftables.Object {
	var timeout *time.Duration
	if s.Timeout > 0 {
		timeout = knftables.PtrTo(s.Timeout)
	}
	if s.Map {
		return &knftables.Map{Name: s.Name, Type: s.Type, TypeOf: s.TypeOf, Flags: s.Flags, Timeout: timeout}
	}
	return &knftables.Set{Name: s.Name, Type: s.Type, TypeOf: s.TypeOf, Flags: s.Flags, Timeout: timeout}
}

// ref is a Set or Map naming s, for flush and delete.
func (s *Set) ref() knftables.Object {
	if s.Map {
		return &knftables.Map{Name: s.Name}
	}
	return &knftables.Set{Name: s.Name}
}

func (s *Set) elementObject(key, value string) *knftables.Element {
	e := &knftables.Element{Key: strings.Split(key, " . ")}
	if s.Map {
		e.Map = s.Name
		e.Value = []string{value}
	} else {
		e.Set = s.Name
	}
	return e
}

// sameSet reports whether two set definitions are equal.
func sameSet(a, b *Set) bool {
	return a.Name == b.Name && a.Map == b.Map && a.Type == b.Type && a.TypeOf == b.TypeOf && slices.Equal(a.Flags, b.Flags) &&
		a.Timeout == b.Timeout && a.Dynamic == b.Dynamic
}
