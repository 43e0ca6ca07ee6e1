package nftables

import (
	"encoding/hex"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/nftables/expr"
	"sigs.k8s.io/knftables"

	"github.com/switchyard-proxy/switchyard/dataplane"
)

func unhex(t *testing.T, s string) []byte {
	t.Helper()
	b, err := hex.DecodeString(s)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestIntervalsCompareAcrossKernelLayouts: the layouts below are kernel
// dumps (kernel 6.18, nft 1.0.6) of interval sets, in dump order; each
// must compare equal to the prefixes nft was given.
func TestIntervalsCompareAcrossKernelLayouts(t *testing.T) {
	type el struct {
		key string
		end bool
	}
	cases := []struct {
		name     string
		prefixes []string
		kernel   []el
	}{
		{"one prefix, end dumped first", []string{"10.244.0.0/16"}, []el{{"0af50000", true}, {"0af40000", false}}},
		{"adjacent prefixes, an end and a start at one key", []string{"120.0.0.0/6", "124.0.0.0/7", "126.0.0.0/8"},
			[]el{{"7f000000", true}, {"7e000000", false}, {"7e000000", true}, {"7c000000", false}, {"7c000000", true}, {"78000000", false}}},
		{"adjacent prefixes merged by nft", []string{"10.0.0.0/9", "10.128.0.0/9"}, []el{{"0a000000", false}, {"0b000000", true}}},
		{"the 0 [end] of a set never flushed", []string{"10.96.0.0/12"}, []el{{"00000000", true}, {"0a600000", false}, {"0a700000", true}}},
		{"up to the top", []string{"255.0.0.0/8"}, []el{{"ff000000", false}}},
		{"an address", []string{"192.0.2.1"}, []el{{"c0000201", false}, {"c0000202", true}}},
		{"overlapping prefixes", []string{"10.0.0.0/8", "10.1.0.0/16"}, []el{{"0a000000", false}, {"0b000000", true}}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := &Set{Name: "x", Type: "ipv4_addr", Flags: []knftables.SetFlag{knftables.IntervalFlag}}
			elems := map[string]string{}
			for _, p := range tc.prefixes {
				elems[p] = ""
			}
			want, _, err := wantElements(dataplane.IPv4, s, elems)
			if err != nil {
				t.Fatal(err)
			}
			ks := &kernelSet{interval: true}
			for _, e := range tc.kernel {
				ks.elems = append(ks.elems, rawElem{key: unhex(t, e.key), end: e.end})
			}
			if d := cmp.Diff(want, gotElements(s, ks)); d != "" {
				t.Errorf("(-prefixes +kernel):\n%s", d)
			}
		})
	}
}

func TestEndpointMapComparesStartsOnly(t *testing.T) {
	s := &Set{Name: "endpoints-tcp-05", Map: true, TypeOf: endpointMapTypeOf(dataplane.IPv4, dataplane.TCP), Flags: []knftables.SetFlag{knftables.IntervalFlag}}
	// A kernel dump: the range 186974208-187039743 → 10.244.0.2 . 8080.
	ks := &kernelSet{isMap: true, interval: true, elems: []rawElem{
		{key: unhex(t, "0b260000"), end: true},
		{key: unhex(t, "0b250000"), val: unhex(t, "0af400021f900000")},
	}}
	want, text, err := wantElements(dataplane.IPv4, s, map[string]string{"186974208-187039743": "10.244.0.2 . 8080"})
	if err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff(want, gotElements(s, ks)); d != "" {
		t.Errorf("(-want +kernel):\n%s", d)
	}
	if got := text[want[0]]; got != "186974208-187039743 : 10.244.0.2 . 8080" {
		t.Errorf("text %q", got)
	}
}

func TestDecodeVerdict(t *testing.T) {
	// A service-ips element's data as the kernel dumps it.
	b := unhex(t, "08000100fffffffc260002007376632d5355535455484c4a2d64656661756c742f7765622f7463702f68747470000000")
	if got := decodeVerdict(b); got != "goto svc-SUSTUHLJ-default/web/tcp/http" {
		t.Errorf("decodeVerdict = %q", got)
	}
	for _, v := range []string{"drop", "return", "jump x", "goto reject-chain"} {
		enc, err := encodeVerdict(v)
		if err != nil {
			t.Fatal(err)
		}
		if got := decodeVerdict(enc); got != v {
			t.Errorf("round trip of %q: %q", v, got)
		}
	}
	if got := decodeVerdict([]byte{1}); got[0] != '?' {
		t.Errorf("garbage decoded as %q", got)
	}
}

// TestSameRule: a rule with a form compares with the kernel's expressions up
// to the nat register ranges the kernel fills in; other rules compare
// by what they reference.
func TestSameRule(t *testing.T) {
	const dnat = "meta l4proto tcp dnat ip addr . port to numgen random mod 65536 offset 186974208 map @endpoints-tcp-05"
	kernel := func(rule string, edit func([]any)) kernelRule {
		ex, err := parseRule(dataplane.IPv4, rule)
		if err != nil {
			t.Fatal(err)
		}
		var out []any
		for _, e := range ex {
			if n, ok := e.(*expr.NAT); ok {
				c := *n
				c.RegAddrMax, c.RegProtoMax = c.RegAddrMin, c.RegProtoMin // as dumped
				e = &c
			}
			out = append(out, e)
		}
		if edit != nil {
			edit(out)
		}
		return kernelRule{exprs: out}
	}
	typed := newRule(dataplane.IPv4, l4proto("tcp"), dnatThrough(186974208, "endpoints-tcp-05"))
	if typed.String() != dnat {
		t.Fatalf("typed rule reads %q, want %q", typed.String(), dnat)
	}
	cases := []struct {
		name string
		want Rule
		got  kernelRule
		same bool
	}{
		{"as dumped", typed, kernel(dnat, nil), true},
		{"another map", typed, kernel(dnat, func(e []any) {
			e[4] = &expr.Lookup{SourceRegister: 1, DestRegister: 1, IsDestRegSet: true, SetName: "endpoints-tcp-06"}
		}), false},
		{"byteorder lost", typed, kernel(dnat, func(e []any) { e[3] = &opaqueExpr{Name: "byteorder"} }), false},
		{"unparsed, same targets", textRule("ct state new jump services"), kernelRule{exprs: []any{&opaqueExpr{"ct"}, &expr.Verdict{Kind: expr.VerdictJump, Chain: "services"}}}, true},
		{"unparsed, other target", textRule("ct state new jump services"), kernelRule{exprs: []any{&expr.Verdict{Kind: expr.VerdictJump, Chain: "masquerading"}}}, false},
		{"unparsed, vmap", textRule("ip daddr . meta l4proto . th dport vmap @service-ips"), kernelRule{exprs: []any{&expr.Lookup{SetName: "service-ips"}}}, true},
		{"unparsed, vmap on another map", textRule("ip daddr . meta l4proto . th dport vmap @service-ips"), kernelRule{exprs: []any{&expr.Lookup{SetName: "firewall-ips"}}}, false},
	}
	for _, tc := range cases {
		if got := sameRule(&tc.want, tc.got); got != tc.same {
			t.Errorf("%s: sameRule = %v", tc.name, got)
		}
	}
}

func TestDiffSorted(t *testing.T) {
	a, b := diffSorted([]string{"a", "b", "b", "d"}, []string{"b", "c", "d", "e"})
	if d := cmp.Diff([]string{"a", "b"}, a); d != "" {
		t.Error(d)
	}
	if d := cmp.Diff([]string{"c", "e"}, b); d != "" {
		t.Error(d)
	}
}
