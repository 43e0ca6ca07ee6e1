package iptablestest

import (
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"strconv"
	"strings"
)

// The options of each match the tracer understands, read for the first
// packet of a connection: its conntrack state is NEW, no -m recent list
// has seen its client, and its source port is unknown.

func (p *parser) dport(opt string, neg bool) error {
	v, err := p.arg(opt)
	if err != nil {
		return err
	}
	lo, hi, isRange := strings.Cut(v, ":")
	if !isRange {
		hi = lo
	}
	a, err1 := strconv.ParseUint(lo, 10, 16)
	z, err2 := strconv.ParseUint(hi, 10, 16)
	if err1 != nil || err2 != nil || a > z {
		return fmt.Errorf("%s %q", opt, v)
	}
	p.add(neg, func(_ *Walker, b *Branch) (bool, error) {
		return uint64(b.Pkt.Port) >= a && uint64(b.Pkt.Port) <= z, nil
	})
	return nil
}

func (p *parser) addrtype(opt string, neg bool) error {
	v, err := p.arg(opt)
	if err != nil {
		return err
	}
	if v != "LOCAL" {
		// UNICAST, BROADCAST and the rest need the node's routes.
		return fmt.Errorf("%s %s: only LOCAL is understood by the tracer", opt, v)
	}
	src := opt == "--src-type"
	p.add(neg, func(w *Walker, b *Branch) (bool, error) {
		if src {
			return w.Local(b.Pkt.Src), nil
		}
		return w.Local(b.Pkt.Dst), nil
	})
	return nil
}

func (p *parser) statistic(opt string, neg bool) error {
	v, err := p.arg(opt)
	if err != nil {
		return err
	}
	if neg {
		return fmt.Errorf("negated %s", opt)
	}
	if opt == "--mode" {
		if v != "random" {
			return fmt.Errorf("statistic mode %q: only random is understood by the tracer", v)
		}
		return nil
	}
	pr, err := strconv.ParseFloat(v, 64)
	if err != nil || pr < 0 || pr > 1 {
		return fmt.Errorf("probability %q", v)
	}
	p.r.prob = pr
	return nil
}

func (p *parser) recent(opt string, neg bool) error {
	if neg {
		return fmt.Errorf("negated %s", opt)
	}
	switch opt {
	case "--name":
		_, err := p.arg(opt)
		return err
	case "--seconds":
		v, err := p.arg(opt)
		if err != nil {
			return err
		}
		s, err := strconv.ParseUint(v, 10, 32)
		if err != nil || s == 0 {
			return fmt.Errorf("--seconds %q", v)
		}
		p.r.seconds = uint32(s)
	case "--rcheck", "--update":
		p.r.rcheck = true
	}
	// --set records the client and matches; --rsource, --rdest and
	// --reap change nothing for a first packet.
	return nil
}

func (p *parser) set(opt string, neg bool) error {
	name, err := p.arg(opt)
	if err != nil {
		return err
	}
	flags, err := p.arg(opt)
	if err != nil {
		return err
	}
	dirs := strings.Split(flags, ",")
	for _, d := range dirs {
		if d != "src" && d != "dst" {
			return fmt.Errorf("--match-set %s %s: direction %q", name, flags, d)
		}
	}
	p.add(neg, func(w *Walker, b *Branch) (bool, error) {
		s, ok := w.set(name)
		if !ok {
			return false, fmt.Errorf("rule matches set %s, which does not exist", name)
		}
		in, err := setHas(s.Type, s.Members, dirs, b)
		if err != nil {
			return false, fmt.Errorf("set %s: %w", name, err)
		}
		return in, nil
	})
	return nil
}

func (p *parser) markMatch(opt string, neg bool) error {
	v, err := p.arg(opt)
	if err != nil {
		return err
	}
	val, mask, err := parseMark(v, true)
	if err != nil {
		return err
	}
	p.add(neg, func(_ *Walker, b *Branch) (bool, error) { return b.Mark&mask == val, nil })
	return nil
}

// ctstates are the conntrack states a match may name.
var ctstates = []string{"NEW", "ESTABLISHED", "RELATED", "INVALID", "UNTRACKED", "SNAT", "DNAT"}

func (p *parser) ctstate(opt string, neg bool) error {
	v, err := p.arg(opt)
	if err != nil {
		return err
	}
	states := strings.Split(v, ",")
	for _, s := range states {
		if !slices.Contains(ctstates, s) {
			return fmt.Errorf("--ctstate %s: state %q", v, s)
		}
	}
	p.add(neg, func(_ *Walker, b *Branch) (bool, error) {
		// A first packet is NEW; it is DNAT once a rule or a virtual
		// server rewrote its destination. It is never SNAT before
		// POSTROUTING, where no rule of ours asks.
		return slices.Contains(states, "NEW") || (b.Endpoint.IsValid() && slices.Contains(states, "DNAT")), nil
	})
	return nil
}

// parseAddrMatch reads -s/-d's value: an address, a prefix, or an
// address and a mask (the shard matches' "0.0.0.5/0.0.0.63").
func parseAddrMatch(v string) (func(netip.Addr) bool, error) {
	a, m, masked := strings.Cut(v, "/")
	addr, err := netip.ParseAddr(a)
	if err != nil {
		return nil, fmt.Errorf("address %q: %w", v, err)
	}
	if !masked {
		return func(x netip.Addr) bool { return x.Unmap() == addr }, nil
	}
	if bits, err := strconv.Atoi(m); err == nil {
		pfx, err := addr.Prefix(bits)
		if err != nil {
			return nil, fmt.Errorf("address %q: %w", v, err)
		}
		return func(x netip.Addr) bool { return pfx.Contains(x.Unmap()) }, nil
	}
	mask, err := netip.ParseAddr(m)
	if err != nil || mask.Is4() != addr.Is4() {
		return nil, fmt.Errorf("address %q: bad mask", v)
	}
	want, mb := addr.AsSlice(), mask.AsSlice()
	return func(x netip.Addr) bool {
		got := x.Unmap().AsSlice()
		if len(got) != len(want) {
			return false
		}
		for i := range got {
			if got[i]&mb[i] != want[i]&mb[i] {
				return false
			}
		}
		return true
	}, nil
}

// parseMark reads "value[/mask]" in any base strconv knows ("0x4000");
// without a mask, the mask is every bit when full, else the value.
func parseMark(s string, full bool) (val, mask uint32, err error) {
	v, m, hasMask := strings.Cut(s, "/")
	x, err := strconv.ParseUint(v, 0, 32)
	if err != nil {
		return 0, 0, fmt.Errorf("mark %q: %w", s, err)
	}
	val, mask = uint32(x), uint32(x)
	if full {
		mask = ^uint32(0)
	}
	if hasMask {
		y, err := strconv.ParseUint(m, 0, 32)
		if err != nil {
			return 0, 0, fmt.Errorf("mark %q: %w", s, err)
		}
		mask = uint32(y)
	}
	return val, mask, nil
}

// targetOptions reads the options after the target and checks them: a
// target option the tracer does not know is an error, as a match is.
func (r *rule) targetOptions(args []string) error {
	opt := func(allowed ...string) (map[string]string, error) {
		out := map[string]string{}
		for i := 0; i < len(args); i++ {
			a := args[i]
			switch {
			case !slices.Contains(allowed, a):
				return nil, fmt.Errorf("-j %s %s: not understood by the tracer", r.target, a)
			case a == "--random-fully" || a == "--random":
				out[a] = ""
			case i+1 >= len(args):
				return nil, fmt.Errorf("-j %s %s without a value", r.target, a)
			default:
				out[a] = args[i+1]
				i++
			}
		}
		return out, nil
	}
	switch r.target {
	case "DNAT":
		o, err := opt("--to-destination")
		if err != nil {
			return err
		}
		return r.parseDNAT(o["--to-destination"])
	case "MARK":
		o, err := opt("--set-xmark", "--set-mark", "--or-mark", "--xor-mark", "--and-mark")
		if err != nil {
			return err
		}
		return r.parseMARK(o)
	case "REJECT":
		_, err := opt("--reject-with")
		return err
	case "MASQUERADE":
		_, err := opt("--random-fully", "--random")
		return err
	case "SNAT", "CONNMARK", "":
		return fmt.Errorf("target %q: not understood by the tracer", r.target)
	}
	if len(args) > 0 {
		// ACCEPT, DROP, RETURN, LOG and chains: LOG's options say how
		// to log, the rest take none.
		if r.target != "LOG" {
			return fmt.Errorf("-j %s takes no options, got %q", r.target, args)
		}
	}
	return nil
}

func (r *rule) parseDNAT(to string) error {
	if to == "" {
		return errors.New("DNAT without --to-destination")
	}
	if ap, err := netip.ParseAddrPort(to); err == nil {
		r.dnat = ap
		return nil
	}
	a, err := netip.ParseAddr(strings.Trim(to, "[]"))
	if err != nil {
		return fmt.Errorf("DNAT --to-destination %q: %w", to, err)
	}
	r.dnat = netip.AddrPortFrom(a, 0)
	return nil
}

func (r *rule) parseMARK(o map[string]string) error {
	if len(o) != 1 {
		return fmt.Errorf("MARK needs one operation, got %d", len(o))
	}
	for op, v := range o {
		val, mask, err := parseMark(v, op == "--set-xmark" || op == "--set-mark")
		if err != nil {
			return err
		}
		switch op {
		case "--set-xmark":
			r.mark = func(m uint32) uint32 { return (m &^ mask) ^ val }
		case "--set-mark":
			r.mark = func(m uint32) uint32 { return (m &^ mask) | val }
		case "--or-mark":
			r.mark = func(m uint32) uint32 { return m | val }
		case "--xor-mark":
			r.mark = func(m uint32) uint32 { return m ^ val }
		case "--and-mark":
			r.mark = func(m uint32) uint32 { return m & val }
		}
	}
	return nil
}
