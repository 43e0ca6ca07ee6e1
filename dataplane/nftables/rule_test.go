package nftables

import (
	"net/netip"
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/switchyard-proxy/switchyard/dataplane"
	"github.com/switchyard-proxy/switchyard/dataplane/dataplanetest"
	"github.com/switchyard-proxy/switchyard/dataplane/internal/sorted"
)

// goldenRulesets calls fn with the render of every golden input in
// both families.
func goldenRulesets(t *testing.T, fn func(dataplane.Family, *Ruleset)) {
	t.Helper()
	for _, name := range dataplanetest.Cases(t, "testdata/*/want.nft") {
		st := dataplanetest.LoadState(t, name)
		for _, fam := range []dataplane.Family{dataplane.IPv4, dataplane.IPv6} {
			rs, err := Render(st, fam)
			if err != nil {
				t.Fatal(err)
			}
			fn(fam, rs)
		}
	}
}

// TestRuleFormsMatchText: every rule the golden states render has a form
// exactly when its text is of the netlink grammar, the form's
// expressions are those the text means (parseRule, checked against nft
// --debug=netlink in TestParseRuleShapes), and the form names the chains
// and sets its text does (Validate reads the form).
func TestRuleFormsMatchText(t *testing.T) {
	forms := 0
	goldenRulesets(t, func(fam dataplane.Family, rs *Ruleset) {
		for _, n := range sorted.Keys(rs.Chains) {
			for i := range rs.Chains[n].Rules {
				r := &rs.Chains[n].Rules[i]
				checkForm(t, fam, r)
				if r.form() != nil {
					forms++
				}
			}
		}
	})
	if forms == 0 {
		t.Error("no golden rule has a form")
	}
}

func checkForm(t *testing.T, fam dataplane.Family, r *Rule) {
	t.Helper()
	text := r.String()
	want, err := parseRule(fam, text)
	got, ok := r.exprs()
	switch {
	case ok != (err == nil):
		t.Errorf("%s %q: form %v, text parses: %v", fam, text, ok, err)
	case ok:
		if d := cmp.Diff(want, got); d != "" {
			t.Errorf("%s %q (-text +form):\n%s", fam, text, d)
		}
	}
	var chains, sets []string
	r.refs(func(n string) { chains = append(chains, n) }, func(n string) { sets = append(sets, n) })
	if !slices.Equal(chains, chainRefs(text)) || !slices.Equal(sets, setRefs(text)) {
		t.Errorf("%s %q: form names chains %q, sets %q", fam, text, chains, sets)
	}
}

// TestRuleFormsFallBack: a form the netlink channel cannot write as nft
// would keeps its text and goes through nft.
func TestRuleFormsFallBack(t *testing.T) {
	v6 := netip.MustParseAddr("fd00::1")
	for _, tc := range []struct {
		name string
		r    Rule
		text string
	}{
		{"address of the other family", newRule(dataplane.IPv4, addrIs(false, v6), jumpTo("x")), "ip saddr fd00::1 jump x"},
		{"dnat without protocol", newRule(dataplane.IPv4, dnatTo(netip.MustParseAddrPort("10.0.0.1:80"))), "dnat to 10.0.0.1:80"},
		{"unknown protocol", newRule(dataplane.IPv4, l4proto("icmp"), dnatTo(netip.MustParseAddrPort("10.0.0.1:1"))), "meta l4proto icmp dnat to 10.0.0.1:1"},
		{"verdict not last", newRule(dataplane.IPv4, gotoTo("a"), gotoTo("b")), "goto a goto b"},
		{"quoted name", newRule(dataplane.IPv4, gotoTo(`"quoted"`)), `goto "quoted"`},
		{"zero modulus", newRule(dataplane.IPv4, numgenZero(0), gotoTo("x")), "numgen random mod 0 0 goto x"},
		{"text only", textRule("reject"), "reject"},
	} {
		if got := tc.r.String(); got != tc.text {
			t.Errorf("%s: text %q, want %q", tc.name, got, tc.text)
		}
		if _, ok := tc.r.exprs(); ok {
			t.Errorf("%s: %q has a form", tc.name, tc.text)
		}
		checkForm(t, dataplane.IPv4, &tc.r)
	}
}
