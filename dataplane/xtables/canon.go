package xtables

import (
	"fmt"
	"net/netip"
	"slices"
	"strconv"
	"strings"
)

// SameRules reports whether rules read back from iptables-save match the
// rendered ones. iptables-save reorders matches and spells some values
// differently (10.0.0.1/32, probabilities with more digits, quotes), so
// rules are compared in a canonical form: options with their values,
// sorted. A false "different" only costs a rewrite. The IPVS mode
// compares its own chains with it too.
func SameRules(saved, rendered []string) bool {
	if len(saved) != len(rendered) {
		return false
	}
	for i := range saved {
		if saved[i] != rendered[i] && CanonRule(saved[i]) != CanonRule(rendered[i]) {
			return false
		}
	}
	return true
}

// CanonRule returns rule as its sorted option groups ("-d 10.0.0.1",
// "! -s 10.244.0.0/16", "-m tcp", …), joined by NULs: rules with the
// same CanonRule are taken to be the same rule. Every full sync and
// every drift read-back canonicalises each rule it compares, so this
// builds each group in one buffer.
func CanonRule(rule string) string {
	toks := tokenize(rule)
	groups := make([]string, 0, len(toks)/2+1)
	var b strings.Builder
	last, open, neg := "", false, false
	flush := func() {
		if open {
			if g := b.String(); !defaultGroups[g] {
				groups = append(groups, g)
			}
			b = strings.Builder{}
			open, last = false, ""
		}
	}
	write := func(t string) {
		if open {
			b.WriteByte(' ')
		}
		b.WriteString(t)
		open, last = true, t
	}
	for _, t := range toks {
		switch {
		case t == "!":
			flush()
			neg = true
		case strings.HasPrefix(t, "-") && len(t) > 1:
			flush()
			if neg {
				write("!")
				neg = false
			}
			write(canonFlag(t))
		default:
			write(canonValue(last, t))
		}
	}
	flush()
	slices.Sort(groups)
	return strings.Join(groups, "\x00")
}

// defaultGroups are options iptables-save adds with their default values.
var defaultGroups = map[string]bool{
	"--rsource": true, "--mask 255.255.255.255": true,
	"--mask ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff": true,
}

var longFlags = map[string]string{
	"--source": "-s", "--destination": "-d", "--protocol": "-p",
	"--jump": "-j", "--goto": "-g", "--match": "-m",
}

func canonFlag(f string) string {
	if s, ok := longFlags[f]; ok {
		return s
	}
	return f
}

// canonValue respells v, the token after last in its group ("" first).
func canonValue(last, v string) string {
	switch last {
	case "-s", "-d":
		v = canonAddr(v)
	case "--probability":
		if p, err := strconv.ParseFloat(v, 64); err == nil {
			v = fmt.Sprintf("%0.8f", p) // the kernel keeps a 32-bit fraction
		}
	}
	return v
}

// tokenize splits on spaces, keeping double-quoted strings whole and
// without their quotes. Quotes and spaces are ASCII, so it works on
// bytes; a rule without quotes is just its fields.
func tokenize(s string) []string {
	if strings.IndexByte(s, '"') < 0 {
		return strings.Fields(s)
	}
	out := make([]string, 0, 16)
	buf := make([]byte, 0, len(s))
	inQuote, have := false, false
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c == '"':
			inQuote, have = !inQuote, true
		case c == ' ' && !inQuote:
			if have {
				out = append(out, string(buf))
				buf, have = buf[:0], false
			}
		default:
			buf, have = append(buf, c), true
		}
	}
	if have {
		out = append(out, string(buf))
	}
	return out
}

// canonAddr spells "addr[/len|/mask]" as netip does, without a full-length
// suffix: "10.0.0.1/32" → "10.0.0.1", "::0/::3f" → "::/::3f".
func canonAddr(v string) string {
	a, m, hasMask := strings.Cut(v, "/")
	addr, err := netip.ParseAddr(a)
	if err != nil {
		return v
	}
	if !hasMask || m == "32" && addr.Is4() || m == "128" && addr.Is6() {
		return addr.String()
	}
	if mask, err := netip.ParseAddr(m); err == nil {
		m = mask.String()
	}
	return addr.String() + "/" + m
}
