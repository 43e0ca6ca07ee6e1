package nftablestest

import (
	"fmt"
	"net/netip"
	"strconv"
	"strings"
)

// kind is how a rule or chain ends for a branch.
type kind int

const (
	kindNone   kind = iota // the rule did not match, or matched without a verdict
	kindAccept             // accept, and the NAT statements (they accept)
	kindDrop
	kindReject
	kindReturn // return, or the end of a chain
	kindJump
	kindGoto
)

// verdict is a rule's verdict; chain for jump and goto.
type verdict struct {
	kind  kind
	chain string
}

// branch is one outcome of one rule.
type branch struct {
	f flow
	v verdict
}

// ruleRun evaluates one rule's expressions left to right, as the kernel
// does: a failed match ends the rule (statements before it took effect),
// a verdict ends it too.
type ruleRun struct {
	w    *walker
	toks []string
}

// rule evaluates one rule for one branch; numgen may split it.
func (w *walker) rule(text string, f flow) ([]branch, error) {
	r := &ruleRun{w: w, toks: tokens(text)}
	return r.from(0, f)
}

// tokens splits a rule into words, braces and commas apart.
func tokens(text string) []string {
	text = strings.NewReplacer("{", " { ", "}", " } ", ",", " , ").Replace(text)
	return strings.Fields(text)
}

// noMatch ends the rule without a verdict.
func noMatch(f flow) ([]branch, error) { return []branch{{f: f}}, nil }

func (r *ruleRun) tok(i int) string {
	if i < len(r.toks) {
		return r.toks[i]
	}
	return ""
}

// expect checks the words at i and returns the index after them.
func (r *ruleRun) expect(i int, words ...string) (int, error) {
	for _, w := range words {
		if r.tok(i) != w {
			return i, fmt.Errorf("want %q at word %d, got %q", w, i+1, r.tok(i))
		}
		i++
	}
	return i, nil
}

// from evaluates the rule from word i on.
func (r *ruleRun) from(i int, f flow) ([]branch, error) {
	if i >= len(r.toks) {
		return []branch{{f: f}}, nil
	}
	switch t := r.toks[i]; t {
	case "ct":
		return r.ctState(i, f)
	case "ip", "ip6", "meta", "th", "tcp", "udp", "sctp":
		return r.selectorExpr(i, f)
	case "fib":
		return r.fib(i, f)
	case "mark":
		return r.mark(i, f)
	case "numgen":
		return r.numgenMatch(i, f)
	case "jump", "goto", "accept", "drop", "return", "continue":
		v, n, err := r.verdictAt(i)
		if err != nil {
			return nil, err
		}
		return r.end(n, f, v)
	case "reject":
		return r.reject(i, f)
	case "dnat":
		return r.dnat(i, f)
	case "masquerade":
		return r.masquerade(i, f)
	case "update":
		return r.update(i, f)
	default:
		return nil, fmt.Errorf("unsupported expression %q", t)
	}
}

// end finishes the rule with v; nothing may follow a verdict.
func (r *ruleRun) end(i int, f flow, v verdict) ([]branch, error) {
	if i != len(r.toks) {
		return nil, fmt.Errorf("unsupported words after the verdict: %q", strings.Join(r.toks[i:], " "))
	}
	return []branch{{f: f, v: v}}, nil
}

// verdictAt reads a verdict statement at i.
func (r *ruleRun) verdictAt(i int) (verdict, int, error) {
	switch t := r.tok(i); t {
	case "jump", "goto":
		c := r.tok(i + 1)
		if c == "" {
			return verdict{}, i, fmt.Errorf("%s without a chain", t)
		}
		k := kindJump
		if t == "goto" {
			k = kindGoto
		}
		return verdict{kind: k, chain: c}, i + 2, nil
	case "accept":
		return verdict{kind: kindAccept}, i + 1, nil
	case "drop":
		return verdict{kind: kindDrop}, i + 1, nil
	case "return":
		return verdict{kind: kindReturn}, i + 1, nil
	case "continue":
		return verdict{kind: kindNone}, i + 1, nil
	default:
		return verdict{}, i, fmt.Errorf("unsupported verdict %q", t)
	}
}

// parseVerdict reads a verdict map's value.
func parseVerdict(value string) (verdict, error) {
	r := &ruleRun{toks: tokens(value)}
	v, n, err := r.verdictAt(0)
	if err == nil && n != len(r.toks) {
		err = fmt.Errorf("unsupported verdict %q", value)
	}
	return v, err
}

// ctState: "ct state [!=] new[,…]". Every traced packet is new.
func (r *ruleRun) ctState(i int, f flow) ([]branch, error) {
	i, err := r.expect(i, "ct", "state")
	if err != nil {
		return nil, err
	}
	neg := r.tok(i) == "!="
	if neg {
		i++
	}
	states, i := r.list(i)
	if len(states) == 0 {
		return nil, fmt.Errorf("ct state without a state")
	}
	isNew := false
	for _, s := range states {
		switch s {
		case "new":
			isNew = true
		case "established", "related", "invalid", "untracked":
		default:
			return nil, fmt.Errorf("unsupported ct state %q", s)
		}
	}
	if isNew == neg {
		return noMatch(f)
	}
	return r.from(i, f)
}

// list reads "a" or "a,b" or "a , b" at i.
func (r *ruleRun) list(i int) ([]string, int) {
	var out []string
	for {
		for _, s := range strings.Split(r.tok(i), ",") {
			if s != "" {
				out = append(out, s)
			}
		}
		i++
		if r.tok(i) != "," {
			return out, i
		}
		i++
	}
}

// fib: "fib saddr|daddr type [!=] local".
func (r *ruleRun) fib(i int, f flow) ([]branch, error) {
	addr := f.src
	switch r.tok(i + 1) {
	case "saddr":
	case "daddr":
		addr = f.dst
	default:
		return nil, fmt.Errorf("unsupported fib expression %q", r.tok(i+1))
	}
	i, err := r.expect(i+2, "type")
	if err != nil {
		return nil, err
	}
	neg := r.tok(i) == "!="
	if neg {
		i++
	}
	if r.tok(i) != "local" {
		return nil, fmt.Errorf("unsupported fib type %q", r.tok(i))
	}
	if r.w.isLocal(addr) == neg {
		return noMatch(f)
	}
	return r.from(i+1, f)
}

// mark: "mark set mark or|xor|and V", "mark set V", "mark and M [==|!=]
// V", "mark [==|!=] V".
func (r *ruleRun) mark(i int, f flow) ([]branch, error) {
	i++
	if r.tok(i) == "set" {
		i++
		if r.tok(i) != "mark" {
			v, err := parseUint(r.tok(i))
			if err != nil {
				return nil, fmt.Errorf("mark set: %w", err)
			}
			f.mark = v
			return r.from(i+1, f)
		}
		op := r.tok(i + 1)
		v, err := parseUint(r.tok(i + 2))
		if err != nil {
			return nil, fmt.Errorf("mark set mark %s: %w", op, err)
		}
		switch op {
		case "or":
			f.mark |= v
		case "xor":
			f.mark ^= v
		case "and":
			f.mark &= v
		default:
			return nil, fmt.Errorf("unsupported mark operation %q", op)
		}
		return r.from(i+3, f)
	}
	got := f.mark
	if r.tok(i) == "and" {
		m, err := parseUint(r.tok(i + 1))
		if err != nil {
			return nil, fmt.Errorf("mark and: %w", err)
		}
		got &= m
		i += 2
	}
	neg := r.tok(i) == "!="
	if neg || r.tok(i) == "==" {
		i++
	}
	want, err := parseUint(r.tok(i))
	if err != nil {
		return nil, fmt.Errorf("mark match: %w", err)
	}
	if (got == want) == neg {
		return noMatch(f)
	}
	return r.from(i+1, f)
}

func parseUint(s string) (uint32, error) {
	v, err := strconv.ParseUint(s, 0, 32)
	if err != nil {
		return 0, fmt.Errorf("number %q: %w", s, err)
	}
	return uint32(v), nil
}

// reject: "reject [with tcp reset | with icmp|icmpv6|icmpx [type] CODE]".
func (r *ruleRun) reject(i int, f flow) ([]branch, error) {
	i++
	if r.tok(i) == "with" {
		switch r.tok(i + 1) {
		case "tcp":
			if r.tok(i+2) != "reset" {
				return nil, fmt.Errorf("unsupported reject with tcp %q", r.tok(i+2))
			}
			i += 3
		case "icmp", "icmpv6", "icmpx":
			i += 2
			if r.tok(i) == "type" {
				i++
			}
			if r.tok(i) == "" {
				return nil, fmt.Errorf("reject with %s without a code", r.tok(i-1))
			}
			i++
		default:
			return nil, fmt.Errorf("unsupported reject with %q", r.tok(i+1))
		}
	}
	f.note("reject")
	return r.end(i, f, verdict{kind: kindReject})
}

// masquerade: "masquerade [fully-random|random|persistent[,…]]". A NAT
// statement accepts.
func (r *ruleRun) masquerade(i int, f flow) ([]branch, error) {
	var flags []string
	n := i + 1
	if r.tok(n) != "" {
		flags, n = r.list(n)
	}
	for _, fl := range flags {
		if fl != "fully-random" && fl != "random" && fl != "persistent" {
			return nil, fmt.Errorf("unsupported masquerade flag %q", fl)
		}
	}
	f.masq = true
	f.note("masquerade")
	return r.end(n, f, verdict{kind: kindAccept})
}

// update: "update @set { ip|ip6 saddr }": the affinity record. The
// first packet only adds to the set; its timeout is the affinity.
func (r *ruleRun) update(i int, f flow) ([]branch, error) {
	name, ok := strings.CutPrefix(r.tok(i+1), "@")
	if !ok {
		return nil, fmt.Errorf("update without a set")
	}
	s := r.w.table.Sets[name]
	if s == nil {
		return nil, fmt.Errorf("update of missing set %s", name)
	}
	i, err := r.expect(i+2, "{")
	if err != nil {
		return nil, err
	}
	sel, i, err := r.selector(i)
	if err != nil {
		return nil, err
	}
	if sel.field != "saddr" {
		return nil, fmt.Errorf("unsupported update key %s %s", sel.fam, sel.field)
	}
	if i, err = r.expect(i, "}"); err != nil {
		return nil, err
	}
	f.affinity = 0
	if s.Timeout != nil {
		f.affinity = *s.Timeout
	}
	f.note("update @" + name)
	return r.from(i, f)
}

// dnat: "dnat [ip|ip6] to ADDR[:PORT]" or "dnat ip|ip6 addr . port to
// DRAW map @M", DRAW "numgen random|inc mod N [offset O]" or "jhash KEY
// mod N seed S offset O". A NAT statement accepts.
func (r *ruleRun) dnat(i int, f flow) ([]branch, error) {
	i++
	if t := r.tok(i); t == "ip" || t == "ip6" {
		i++
	}
	if r.tok(i) == "to" {
		target := r.tok(i + 1)
		addr, port, err := parseTarget(target, f.dport)
		if err != nil {
			return nil, err
		}
		if addr.Is4() != f.dst.Is4() {
			return nil, fmt.Errorf("dnat to %s: another family", target)
		}
		f.dst, f.dport, f.dnat = addr, port, true
		f.marked = f.mark&r.w.masqMark != 0
		f.note("dnat to " + netip.AddrPortFrom(addr, port).String())
		return r.end(i+2, f, verdict{kind: kindAccept})
	}
	i, err := r.expect(i, "addr", ".", "port", "to")
	if err != nil {
		return nil, err
	}
	var ng numgen
	switch {
	case r.tok(i) == "jhash":
		ng, i, err = r.jhash(i, f)
	case r.tok(i) == "numgen":
		ng, i, err = r.numgen(i)
	default:
		return nil, fmt.Errorf("unsupported dnat map key %q", r.tok(i))
	}
	if err != nil {
		return nil, err
	}
	if i, err = r.expect(i, "map"); err != nil {
		return nil, err
	}
	return r.dnatMap(i, f, ng)
}

// parseTarget reads "A", "A:P" or "[A6]:P"; without a port the port
// stays.
func parseTarget(s string, port uint16) (netip.Addr, uint16, error) {
	if ap, err := netip.ParseAddrPort(s); err == nil {
		return ap.Addr().Unmap(), ap.Port(), nil
	}
	a, err := netip.ParseAddr(strings.Trim(s, "[]"))
	if err != nil {
		return netip.Addr{}, 0, fmt.Errorf("dnat target %q: %w", s, err)
	}
	return a.Unmap(), port, nil
}
