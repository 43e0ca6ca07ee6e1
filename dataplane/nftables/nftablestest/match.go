package nftablestest

import (
	"fmt"
	"net/netip"
	"strconv"
	"strings"

	"sigs.k8s.io/knftables"
)

// selector is a packet field a rule reads.
type selector struct {
	fam   string // "ip" or "ip6" for addresses
	field string // saddr, daddr, l4proto, dport
	proto string // "tcp" in "tcp dport"; empty for "th dport"
}

func (s selector) String() string {
	switch s.field {
	case "l4proto":
		return "meta l4proto"
	case "dport":
		if s.proto == "" {
			return "th dport"
		}
		return s.proto + " dport"
	}
	return s.fam + " " + s.field
}

// selector reads one selector at i.
func (r *ruleRun) selector(i int) (selector, int, error) {
	t, f := r.tok(i), r.tok(i+1)
	switch {
	case (t == "ip" || t == "ip6") && (f == "saddr" || f == "daddr"):
		return selector{fam: t, field: f}, i + 2, nil
	case t == "meta" && f == "l4proto":
		return selector{field: f}, i + 2, nil
	case t == "th" && f == "dport":
		return selector{field: f}, i + 2, nil
	case (t == "tcp" || t == "udp" || t == "sctp") && f == "dport":
		return selector{field: f, proto: t}, i + 2, nil
	}
	return selector{}, i, fmt.Errorf("unsupported expression %q", strings.TrimSpace(t+" "+f))
}

// value is what a selector reads from a packet.
type value struct {
	addr  netip.Addr
	proto string
	port  uint16
}

// of is the packet's value for s; false when s does not apply to the
// packet (an ip field of an IPv6 packet in an inet table, the tcp port
// of a UDP packet): a rule reading it does not match.
func (s selector) of(f flow) (value, bool) {
	switch s.field {
	case "saddr", "daddr":
		a := f.src
		if s.field == "daddr" {
			a = f.dst
		}
		return value{addr: a}, (s.fam == "ip") == a.Is4()
	case "l4proto":
		return value{proto: f.proto}, true
	default:
		return value{port: f.dport}, s.proto == "" || s.proto == f.proto
	}
}

// selectorExpr: selectors joined by "." and then a literal, "@set",
// "!= @set" or "vmap @map".
func (r *ruleRun) selectorExpr(i int, f flow) ([]branch, error) {
	sel, i, err := r.selector(i)
	if err != nil {
		return nil, err
	}
	sels := []selector{sel}
	for r.tok(i) == "." {
		if sel, i, err = r.selector(i + 1); err != nil {
			return nil, err
		}
		sels = append(sels, sel)
	}
	vals, applies := make([]value, len(sels)), true
	for k, s := range sels {
		var ok bool
		vals[k], ok = s.of(f)
		applies = applies && ok
	}
	neg := r.tok(i) == "!="
	if neg || r.tok(i) == "==" {
		i++
	}
	switch op := r.tok(i); {
	case op == "vmap" && !neg:
		return r.vmap(i+1, f, sels, vals, applies)
	case strings.HasPrefix(op, "@"):
		return r.lookup(i, f, sels, vals, applies, neg)
	case op == "{" || op == "":
		return nil, fmt.Errorf("unsupported match after %s: %q (anonymous sets are not rendered)", sels[0], op)
	case len(sels) > 1:
		return nil, fmt.Errorf("concatenation compared with %q: want @set or vmap @map", op)
	}
	ok, err := matchComponent(sels[0], vals[0], r.tok(i))
	if err != nil {
		return nil, err
	}
	if !applies || ok == neg {
		return noMatch(f)
	}
	return r.from(i+1, f)
}

// lookup is "@set" (or "!= @set") at i. A match of the hairpin set is
// taken as no match: the hairpin case is not reported.
func (r *ruleRun) lookup(i int, f flow, sels []selector, vals []value, applies, neg bool) ([]branch, error) {
	name := strings.TrimPrefix(r.tok(i), "@")
	s := r.w.table.Sets[name]
	if s == nil {
		return nil, fmt.Errorf("lookup in missing set %s", name)
	}
	el, err := find(s.Elements, sels, vals)
	if err != nil {
		return nil, fmt.Errorf("set %s: %w", name, err)
	}
	member := applies && el != nil
	if member && !neg && name == r.w.hairpin {
		f.note("@" + name + ": hairpin, not reported")
		return noMatch(f)
	}
	if !applies || member == neg {
		return noMatch(f)
	}
	return r.from(i+1, f)
}

// vmap is "vmap @map" with "@map" at i: the element's verdict ends the
// rule; no element, no match.
func (r *ruleRun) vmap(i int, f flow, sels []selector, vals []value, applies bool) ([]branch, error) {
	m, err := r.namedMap(i, "vmap")
	if err != nil {
		return nil, err
	}
	name := m.Name
	el, err := find(m.Elements, sels, vals)
	if err != nil {
		return nil, fmt.Errorf("map %s: %w", name, err)
	}
	if !applies || el == nil {
		return noMatch(f)
	}
	val := strings.Join(el.Value, " . ")
	v, err := parseVerdict(val)
	if err != nil {
		return nil, fmt.Errorf("map %s: %w", name, err)
	}
	f.note("@" + name + ": " + val)
	return r.end(i+1, f, v)
}

// find returns the first element whose key holds vals.
func find(elems []*knftables.Element, sels []selector, vals []value) (*knftables.Element, error) {
	for _, el := range elems {
		key := splitKey(el.Key)
		if len(key) != len(sels) {
			return nil, fmt.Errorf("element %q has %d parts, the rule reads %d", strings.Join(key, " . "), len(key), len(sels))
		}
		all := true
		for k := range sels {
			ok, err := matchComponent(sels[k], vals[k], key[k])
			if err != nil {
				return nil, fmt.Errorf("element %q: %w", strings.Join(key, " . "), err)
			}
			all = all && ok
		}
		if all {
			return el, nil
		}
	}
	return nil, nil
}

// splitKey normalizes a key: the Fake keeps what it was given, one
// string "a . b" or the parts apart.
func splitKey(key []string) []string {
	return strings.Split(strings.Join(key, " . "), " . ")
}

// matchComponent compares a value with one literal or key part: an
// address, prefix or address range; a protocol name or number; a port
// or port range.
func matchComponent(s selector, v value, lit string) (bool, error) {
	switch s.field {
	case "saddr", "daddr":
		return matchAddr(v.addr, lit)
	case "l4proto":
		want, ok := protoNumber(lit)
		if !ok {
			return false, fmt.Errorf("protocol %q", lit)
		}
		got, _ := protoNumber(v.proto)
		return got == want, nil
	default:
		lo, hi, err := parseRange(lit)
		if err != nil || hi > 65535 {
			return false, fmt.Errorf("port %q", lit)
		}
		return uint64(v.port) >= lo && uint64(v.port) <= hi, nil
	}
}

func matchAddr(a netip.Addr, lit string) (bool, error) {
	if strings.Contains(lit, "/") {
		p, err := netip.ParsePrefix(lit)
		if err != nil {
			return false, fmt.Errorf("prefix %q: %w", lit, err)
		}
		return p.Contains(a), nil
	}
	if lo, hi, ok := strings.Cut(lit, "-"); ok {
		l, err1 := netip.ParseAddr(lo)
		h, err2 := netip.ParseAddr(hi)
		if err1 != nil || err2 != nil || l.Is4() != h.Is4() {
			return false, fmt.Errorf("address range %q", lit)
		}
		return a.Is4() == l.Is4() && a.Compare(l) >= 0 && a.Compare(h) <= 0, nil
	}
	b, err := netip.ParseAddr(lit)
	if err != nil {
		return false, fmt.Errorf("address %q: %w", lit, err)
	}
	return a == b.Unmap(), nil
}

func protoNumber(s string) (int, bool) {
	switch s {
	case "icmp":
		return 1, true
	case "tcp":
		return 6, true
	case "udp":
		return 17, true
	case "icmpv6":
		return 58, true
	case "sctp":
		return 132, true
	}
	n, err := strconv.Atoi(s)
	return n, err == nil && n >= 0 && n < 256
}

// parseRange reads "N" or "LO-HI".
func parseRange(s string) (lo, hi uint64, err error) {
	l, h, isRange := strings.Cut(s, "-")
	if lo, err = strconv.ParseUint(l, 0, 64); err != nil {
		return 0, 0, err
	}
	if !isRange {
		return lo, lo, nil
	}
	if hi, err = strconv.ParseUint(h, 0, 64); err != nil {
		return 0, 0, err
	}
	if hi < lo {
		return 0, 0, fmt.Errorf("range %q ends before it starts", s)
	}
	return lo, hi, nil
}
