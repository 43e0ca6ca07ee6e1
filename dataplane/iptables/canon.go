package iptables

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
		if CanonRule(saved[i]) != CanonRule(rendered[i]) {
			return false
		}
	}
	return true
}

// CanonRule returns rule as its sorted option groups ("-d 10.0.0.1",
// "! -s 10.244.0.0/16", "-m tcp", …), joined by NULs: rules with the
// same CanonRule are taken to be the same rule.
func CanonRule(rule string) string {
	toks := tokenize(rule)
	var groups []string
	var cur []string
	neg := false
	flush := func() {
		if len(cur) > 0 {
			groups = append(groups, strings.Join(cur, " "))
			cur = nil
		}
	}
	for _, t := range toks {
		switch {
		case t == "!":
			flush()
			neg = true
		case strings.HasPrefix(t, "-") && len(t) > 1:
			flush()
			if neg {
				cur = append(cur, "!")
				neg = false
			}
			cur = append(cur, canonFlag(t))
		default:
			cur = append(cur, canonValue(cur, t))
		}
	}
	flush()
	groups = slices.DeleteFunc(groups, func(g string) bool { return defaultGroups[g] })
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

func canonValue(group []string, v string) string {
	if len(group) == 0 {
		return v
	}
	switch group[len(group)-1] {
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
// without their quotes.
func tokenize(s string) []string {
	var out []string
	var b strings.Builder
	inQuote, have := false, false
	for _, r := range s {
		switch {
		case r == '"':
			inQuote, have = !inQuote, true
		case r == ' ' && !inQuote:
			if have {
				out = append(out, b.String())
				b.Reset()
				have = false
			}
		default:
			b.WriteRune(r)
			have = true
		}
	}
	if have {
		out = append(out, b.String())
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
