package translate

import (
	"fmt"
	"net/netip"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// parseCase is an input to a parser and what it must give in canonical
// form, "" when the parser rejects it.
type parseCase struct{ in, want string }

// runParseCases parses each case's input with parse, named what in
// errors, and checks the canonical form and, for a result, check.
func runParseCases[T fmt.Stringer](t *testing.T, what string, parse func(string) (T, bool), check func(*testing.T, T), cases []parseCase) {
	t.Helper()
	for _, tc := range cases {
		t.Run(tc.in, func(t *testing.T) {
			v, ok := parse(tc.in)
			got := ""
			if ok {
				got = v.String()
				check(t, v)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("%s(%q) mismatch (-want +got):\n%s", what, tc.in, diff)
			}
		})
	}
}

func TestParseAddr(t *testing.T) {
	runParseCases(t, "parseAddr", parseAddr, func(*testing.T, netip.Addr) {}, []parseCase{
		{in: "10.0.0.1", want: "10.0.0.1"},
		{in: "010.000.000.001", want: "10.0.0.1"},
		{in: "10.0.0.0256"},
		{in: "10.0.0.256"},
		{in: "10.0.0"},
		{in: "10.0.0.1.2"},
		{in: "10..0.1"},
		{in: "+1.0.0.1"},
		{in: " 10.0.0.1"},
		{in: "2001:DB8:0:0:0:0:0:0001", want: "2001:db8::1"},
		{in: "::ffff:192.0.2.1", want: "192.0.2.1"},
		{in: "::ffff:c000:201", want: "192.0.2.1"},
		{in: "fe80::1%eth0"},
		{in: "0.0.0.0"},
		{in: "::"},
		{in: ""},
		{in: "localhost"},
	})
}

func TestParsePrefix(t *testing.T) {
	masked := func(t *testing.T, p netip.Prefix) {
		if p != p.Masked() {
			t.Errorf("prefix %s not masked", p)
		}
	}
	runParseCases(t, "parsePrefix", parsePrefix, masked, []parseCase{
		{in: "192.0.2.0/24", want: "192.0.2.0/24"},
		{in: "192.0.2.77/24", want: "192.0.2.0/24"},
		{in: "010.0.0.0/8", want: "10.0.0.0/8"},
		{in: "010.0.0.0/+8"},
		{in: "010.0.0.0/33"},
		{in: "10.0.0.0"},
		{in: "2001:db8::1/32", want: "2001:db8::/32"},
		{in: "::ffff:10.0.0.0/104", want: "10.0.0.0/8"},
		{in: "::ffff:0:0/64"},
		{in: "0.0.0.0/0", want: "0.0.0.0/0"},
		{in: "::/0", want: "::/0"},
		{in: "fe80::%eth0/64"},
	})
}

func TestFamilies(t *testing.T) {
	var f families
	f.add(familyOf(netip.MustParseAddr("2001:db8::1")))
	if f.has(familyOf(netip.MustParseAddr("10.0.0.1"))) || !f.has(familyOf(netip.MustParseAddr("::1"))) {
		t.Errorf("families = %b, want IPv6 only", f)
	}
}
