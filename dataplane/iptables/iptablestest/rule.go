package iptablestest

import (
	"errors"
	"fmt"
	"net/netip"
	"strings"

	"github.com/switchyard-proxy/switchyard/dataplane"
)

// rule is one rule of a chain as the Walker reads it: the conditions a
// packet must meet, the -m statistic probability and the target. Only
// what the modes of this repository write is understood; anything else
// is an error, so that a rule the tracer cannot judge never passes as
// matching or not matching.
type rule struct {
	raw   string
	conds []cond
	// prob is the -m statistic --mode random probability; 1 without.
	prob float64
	// rcheck: -m recent --rcheck or --update, which only a client seen
	// before matches; a first packet never does. seconds is its
	// --seconds, the affinity timeout.
	rcheck  bool
	seconds uint32
	// target is a chain or a built-in target, "" for none; goTo is -g.
	target string
	goTo   bool
	// dnat is DNAT's --to-destination (port 0: the port is kept).
	dnat netip.AddrPort
	// mark is MARK's change of the packet mark.
	mark func(uint32) uint32
}

// cond is one condition of a rule, evaluated on a branch.
type cond func(w *Walker, b *Branch) (bool, error)

// modules are the matches (-m) the tracer understands.
var modules = map[string]bool{
	"tcp": true, "udp": true, "sctp": true, "addrtype": true, "statistic": true,
	"recent": true, "set": true, "mark": true, "conntrack": true, "comment": true,
}

// parseRule reads rule text as a Fake stores it (what follows "-A CHAIN ").
func parseRule(raw string) (*rule, error) {
	tok, err := fields(raw)
	if err != nil {
		return nil, fmt.Errorf("rule %q: %w", raw, err)
	}
	p := &parser{r: &rule{raw: raw, prob: 1}, tok: tok, mods: map[string]bool{}}
	for p.i < len(p.tok) {
		if err := p.next(); err != nil {
			return nil, fmt.Errorf("rule %q: %w", raw, err)
		}
	}
	if p.neg {
		return nil, fmt.Errorf("rule %q: \"!\" negates nothing", raw)
	}
	if p.r.rcheck && p.r.seconds == 0 {
		// Without --seconds a recent entry never expires; no mode here
		// writes that, and the affinity it means cannot be reported.
		return nil, fmt.Errorf("rule %q: -m recent --rcheck without --seconds", raw)
	}
	return p.r, nil
}

// fields splits rule text at spaces, keeping double-quoted strings (the
// comments) whole and unquoted.
func fields(s string) ([]string, error) {
	var out []string
	var cur strings.Builder
	quoted, has := false, false
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c == '"':
			quoted, has = !quoted, true
		case c == '\\' && quoted && i+1 < len(s):
			i++
			cur.WriteByte(s[i])
		case c == ' ' && !quoted:
			if has {
				out = append(out, cur.String())
				cur.Reset()
				has = false
			}
		default:
			cur.WriteByte(c)
			has = true
		}
	}
	if quoted {
		return nil, errors.New("unterminated quote")
	}
	if has {
		out = append(out, cur.String())
	}
	return out, nil
}

// parser reads the tokens of one rule in order.
type parser struct {
	r    *rule
	tok  []string
	i    int
	mods map[string]bool // matches loaded, by -m or by -p
	neg  bool            // a "!" precedes the next option
}

// arg takes the value of the option just read.
func (p *parser) arg(opt string) (string, error) {
	if p.i >= len(p.tok) {
		return "", fmt.Errorf("%s without a value", opt)
	}
	p.i++
	return p.tok[p.i-1], nil
}

func (p *parser) add(neg bool, c cond) {
	if neg {
		inner := c
		c = func(w *Walker, b *Branch) (bool, error) {
			ok, err := inner(w, b)
			return !ok, err
		}
	}
	p.r.conds = append(p.r.conds, c)
}

// next reads one option: a generic one (-s, -d, -p), a match (-m), an
// option of a loaded match, or the target with its options.
func (p *parser) next() error {
	t := p.tok[p.i]
	p.i++
	if t == "!" {
		if p.neg {
			return errors.New("\"! !\"")
		}
		p.neg = true
		return nil
	}
	neg := p.neg
	p.neg = false
	switch t {
	case "-s", "--source", "-d", "--destination":
		v, err := p.arg(t)
		if err != nil {
			return err
		}
		m, err := parseAddrMatch(v)
		if err != nil {
			return err
		}
		dst := t == "-d" || t == "--destination"
		p.add(neg, func(_ *Walker, b *Branch) (bool, error) {
			if dst {
				return m(b.Pkt.Dst), nil
			}
			return m(b.Pkt.Src), nil
		})
	case "-p", "--protocol":
		v, err := p.arg(t)
		if err != nil {
			return err
		}
		if v != "tcp" && v != "udp" && v != "sctp" {
			return fmt.Errorf("protocol %q", v)
		}
		proto, _ := dataplane.ParseProtocol(v)
		p.mods[v] = true // -p loads the protocol's match, as iptables does
		p.add(neg, func(_ *Walker, b *Branch) (bool, error) { return b.Pkt.Protocol == proto, nil })
	case "-m", "--match":
		v, err := p.arg(t)
		if err != nil {
			return err
		}
		if neg || !modules[v] {
			return fmt.Errorf("match -m %s: not understood by the tracer", v)
		}
		p.mods[v] = true
	case "-j", "--jump", "-g", "--goto":
		if neg {
			return fmt.Errorf("negated %s", t)
		}
		v, err := p.arg(t)
		if err != nil {
			return err
		}
		p.r.target, p.r.goTo = v, t == "-g" || t == "--goto"
		args := p.tok[p.i:]
		p.i = len(p.tok)
		return p.r.targetOptions(args)
	default:
		return p.option(t, neg)
	}
	return nil
}

// optionMatch names the match each match option belongs to ("" for the
// protocol matches, any of which serves).
var optionMatch = map[string]string{
	"--dport": "", "--destination-port": "",
	"--src-type": "addrtype", "--dst-type": "addrtype",
	"--mode": "statistic", "--probability": "statistic",
	"--name": "recent", "--rsource": "recent", "--rdest": "recent", "--reap": "recent",
	"--rcheck": "recent", "--update": "recent", "--set": "recent", "--seconds": "recent",
	"--match-set": "set", "--mark": "mark", "--ctstate": "conntrack", "--comment": "comment",
}

// matchOptions reads the options of each match, by the match's name as
// optionMatch gives it.
var matchOptions = map[string]func(p *parser, opt string, neg bool) error{
	"":          (*parser).dport,
	"addrtype":  (*parser).addrtype,
	"statistic": (*parser).statistic,
	"recent":    (*parser).recent,
	"set":       (*parser).set,
	"mark":      (*parser).markMatch,
	"conntrack": (*parser).ctstate,
	"comment":   (*parser).comment,
}

// option reads an option of a loaded match.
func (p *parser) option(opt string, neg bool) error {
	m, ok := optionMatch[opt]
	if !ok {
		return fmt.Errorf("option %s: not understood by the tracer", opt)
	}
	loaded := p.mods[m]
	if m == "" {
		loaded = p.mods["tcp"] || p.mods["udp"] || p.mods["sctp"]
	}
	if !loaded {
		return fmt.Errorf("option %s without its match loaded", opt)
	}
	return matchOptions[m](p, opt, neg)
}

// comment reads --comment, which says why and never decides.
func (p *parser) comment(opt string, _ bool) error {
	_, err := p.arg(opt)
	return err
}
