package nftables

import (
	"regexp"
	"slices"
	"testing"

	"github.com/switchyard-proxy/switchyard/dataplane"
)

// The reference scanners replaced these expressions; they must find the
// same names in every rule and map value the renderer writes, and in the
// odd strings below.
var (
	refChainRE = regexp.MustCompile(`\b(?:goto|jump) ([^ ]+)`)
	refSetRE   = regexp.MustCompile(`@([^ ,}]+)`)
)

func reNames(re *regexp.Regexp, s string) []string {
	var out []string
	for _, m := range re.FindAllStringSubmatch(s, -1) {
		out = append(out, m[1])
	}
	return out
}

func checkScan(t *testing.T, s string) {
	t.Helper()
	if got, want := chainRefs(s), reNames(refChainRE, s); !slices.Equal(got, want) {
		t.Errorf("chainRefs(%q) = %q, regexp finds %q", s, got, want)
	}
	if got, want := setRefs(s), reNames(refSetRE, s); !slices.Equal(got, want) {
		t.Errorf("setRefs(%q) = %q, regexp finds %q", s, got, want)
	}
}

func TestRefScanMatchesRegexp(t *testing.T) {
	for _, s := range []string{
		"", "goto", "goto ", "jump x", "xjump y", "_goto y", "-goto y", "goto a goto b", "jump  a",
		"@", "@@x", "@a,@b}", "ip saddr @nope drop", "vmap { 1 : goto c, 2 : jump d }", "x@y z",
		"goto svc-A/b/tcp/p", "jump goto 0", "goto jump jump x", "a goto@b c", "ip daddr . meta l4proto . th dport vmap @service-ips", "jump\tx", "@a}b @c",
	} {
		checkScan(t, s)
	}
	goldenRulesets(t, func(_ dataplane.Family, rs *Ruleset) {
		for _, c := range rs.Chains {
			for _, r := range c.Rules {
				checkScan(t, r.String())
			}
		}
		for _, m := range rs.Elements {
			for _, v := range m {
				checkScan(t, v)
			}
		}
	})
}
