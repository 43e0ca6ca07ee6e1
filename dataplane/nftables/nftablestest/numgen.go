package nftablestest

import (
	"fmt"
	"net/netip"
	"strconv"
	"strings"

	"sigs.k8s.io/knftables"
)

// numgen is "numgen random|inc mod N [offset O]": uniform over [O,
// O+N). For inc (round-robin) the counter's position is state the tracer
// does not have, and over N connections every value comes once, so it
// is read as uniform too.
type numgen struct{ mod, offset uint64 }

func (ng numgen) String() string {
	if ng.offset == 0 {
		return fmt.Sprintf("numgen random mod %d", ng.mod)
	}
	return fmt.Sprintf("numgen random mod %d offset %d", ng.mod, ng.offset)
}

// share is the probability that a draw falls in [lo, hi].
func (ng numgen) share(lo, hi uint64) float64 {
	first, last := max(lo, ng.offset), min(hi, ng.offset+ng.mod-1)
	if last < first {
		return 0
	}
	return float64(last-first+1) / float64(ng.mod)
}

// numgen reads "numgen random|inc mod N [offset O]" at i.
func (r *ruleRun) numgen(i int) (numgen, int, error) {
	i, err := r.expect(i, "numgen")
	if err != nil {
		return numgen{}, i, err
	}
	if t := r.tok(i); t != "random" && t != "inc" {
		return numgen{}, i, fmt.Errorf("numgen %q", t)
	}
	if i, err = r.expect(i+1, "mod"); err != nil {
		return numgen{}, i, err
	}
	var ng numgen
	if ng.mod, err = strconv.ParseUint(r.tok(i), 10, 32); err != nil || ng.mod == 0 {
		return ng, i, fmt.Errorf("numgen modulus %q", r.tok(i))
	}
	i++
	if r.tok(i) == "offset" {
		if ng.offset, err = strconv.ParseUint(r.tok(i+1), 10, 32); err != nil {
			return ng, i, fmt.Errorf("numgen offset %q", r.tok(i+1))
		}
		i += 2
	}
	return ng, i, nil
}

// numgenMatch is a numgen compared with a value or range, or looked up
// in a verdict map: the packet splits into the branches that match
// (their share of the draw) and the rest, which goes on to the next
// rule.
func (r *ruleRun) numgenMatch(i int, f flow) ([]branch, error) {
	ng, i, err := r.numgen(i)
	if err != nil {
		return nil, err
	}
	if r.tok(i) == "vmap" {
		return r.numgenVmap(i+1, f, ng)
	}
	neg := r.tok(i) == "!="
	if neg || r.tok(i) == "==" {
		i++
	}
	lo, hi, err := parseRange(r.tok(i))
	if err != nil {
		return nil, fmt.Errorf("%s compared with %q: %w", ng, r.tok(i), err)
	}
	p := ng.share(lo, hi)
	if neg {
		p = 1 - p
	}
	var out []branch
	if p > 0 {
		g := f.fork(p)
		g.note(fmt.Sprintf("%s %s: %.4g", ng, r.tok(i), p))
		brs, err := r.from(i+1, g)
		if err != nil {
			return nil, err
		}
		out = append(out, brs...)
	}
	if p < 1 {
		out = append(out, branch{f: f.fork(1 - p)})
	}
	return out, nil
}

// numgenVmap is "numgen … vmap @map", "@map" at i: a branch per element
// the draw can reach, ending in its verdict.
func (r *ruleRun) numgenVmap(i int, f flow, ng numgen) ([]branch, error) {
	m, err := r.namedMap(i, "numgen")
	if err != nil {
		return nil, err
	}
	return r.splitDraw(f, ng, m, func(g flow, val string) ([]branch, error) {
		v, err := parseVerdict(val)
		if err != nil {
			return nil, fmt.Errorf("map %s: %w", m.Name, err)
		}
		g.note("@" + m.Name + ": " + val)
		return r.end(i+1, g, v)
	})
}

// dnatMap is "dnat … to numgen … map @map", "@map" at i: a branch per
// endpoint, with its range's share. Draws no element covers make the
// rule fail (no DNAT), as the kernel's lookup does.
func (r *ruleRun) dnatMap(i int, f flow, ng numgen) ([]branch, error) {
	m, err := r.namedMap(i, "numgen")
	if err != nil {
		return nil, err
	}
	return r.splitDraw(f, ng, m, func(g flow, val string) ([]branch, error) {
		parts := strings.Split(val, " . ")
		if len(parts) != 2 {
			return nil, fmt.Errorf("map %s: value %q: want address . port", m.Name, val)
		}
		a, err := netip.ParseAddr(parts[0])
		if err != nil || a.Unmap().Is4() != f.dst.Is4() {
			return nil, fmt.Errorf("map %s: address %q of another family or unreadable", m.Name, parts[0])
		}
		port, err := strconv.ParseUint(parts[1], 10, 16)
		if err != nil {
			return nil, fmt.Errorf("map %s: port %q", m.Name, parts[1])
		}
		g.dst, g.dport, g.dnat = a.Unmap(), uint16(port), true
		g.marked = g.mark&r.w.masqMark != 0
		g.note(fmt.Sprintf("dnat to %s (@%s)", netip.AddrPortFrom(g.dst, g.dport), m.Name))
		return r.end(i+1, g, verdict{kind: kindAccept})
	})
}

// namedMap is the map "@name" at i, which what (the statement) looks up.
func (r *ruleRun) namedMap(i int, what string) (*knftables.FakeMap, error) {
	name, ok := strings.CutPrefix(r.tok(i), "@")
	if !ok {
		return nil, fmt.Errorf("%s %q: only named maps are rendered", what, r.tok(i))
	}
	m := r.w.table.Maps[name]
	if m == nil {
		return nil, fmt.Errorf("%s of missing map %s", what, name)
	}
	return m, nil
}

// splitDraw forks f over the elements of an interval map keyed by the
// draw: each element reached gets a branch with its share, handled by
// each; the part of the draw no element covers is a branch that does
// not match.
func (r *ruleRun) splitDraw(f flow, ng numgen, m *knftables.FakeMap, each func(flow, string) ([]branch, error)) ([]branch, error) {
	var out []branch
	covered := 0.0
	for _, el := range m.Elements {
		key := splitKey(el.Key)
		if len(key) != 1 {
			return nil, fmt.Errorf("map %s: key %q is not a number or range", m.Name, strings.Join(key, " . "))
		}
		lo, hi, err := parseRange(key[0])
		if err != nil {
			return nil, fmt.Errorf("map %s: key %q: %w", m.Name, key[0], err)
		}
		p := ng.share(lo, hi)
		if p == 0 {
			continue
		}
		covered += p
		brs, err := each(f.fork(p), strings.Join(el.Value, " . "))
		if err != nil {
			return nil, err
		}
		out = append(out, brs...)
	}
	if covered > 1+1e-9 {
		return nil, fmt.Errorf("map %s: elements overlap within %s (%.6f of the draw)", m.Name, ng, covered)
	}
	if rest := 1 - covered; rest > 1e-12 {
		g := f.fork(rest)
		g.note(fmt.Sprintf("%s: %.4g of the draw in no element of @%s", ng, rest, m.Name))
		out = append(out, branch{f: g})
	}
	return out, nil
}
