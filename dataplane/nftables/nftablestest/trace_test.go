package nftablestest

import (
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"testing"

	"sigs.k8s.io/knftables"

	"github.com/switchyard-proxy/switchyard/dataplane"
	"github.com/switchyard-proxy/switchyard/dataplane/explain"
)

// load is a Fake holding table "t" of fam, each line "KIND REST" read as
// "add KIND FAM t REST".
func load(t *testing.T, fam knftables.Family, lines ...string) *knftables.Fake {
	t.Helper()
	f := knftables.NewFake(fam, "t")
	var b strings.Builder
	fmt.Fprintf(&b, "add table %s t\n", fam)
	for _, l := range lines {
		kind, rest, _ := strings.Cut(l, " ")
		fmt.Fprintf(&b, "add %s %s t %s\n", kind, fam, rest)
	}
	if err := f.ParseDump(b.String()); err != nil {
		t.Fatalf("ParseDump: %v", err)
	}
	return f
}

// base is a small table shaped as the mode's: one service whose block
// [131072, 196608) gives 10.244.0.2 a quarter and 10.244.1.2 the rest
// (the map's other block belongs to another chain), masquerade for
// sources outside the pods, a hairpin set, no-endpoint verdicts in the
// filter hooks.
var base = []string{
	"chain nat-prerouting { type nat hook prerouting priority -100 ; }",
	"chain nat-output { type nat hook output priority -100 ; }",
	"chain nat-postrouting { type nat hook postrouting priority 100 ; }",
	"chain filter-forward { type filter hook forward priority 0 ; }",
	"chain filter-input { type filter hook input priority 0 ; }",
	"chain filter-output { type filter hook output priority 0 ; }",
	"chain services", "chain svc", "chain checks", "chain reject-chain",
	"chain mark-for-masquerade", "chain masquerading",
	"set pods { type ipv4_addr ; flags interval ; }",
	"set hairpin-endpoints { type ipv4_addr . ipv4_addr ; }",
	"map service-ips { type ipv4_addr . inet_proto . inet_service : verdict ; }",
	"map no-endpoints { type ipv4_addr . inet_proto . inet_service : verdict ; }",
	"map eps { typeof numgen random mod 65536 : ip daddr . tcp dport ; flags interval ; }",
	"rule nat-prerouting jump services",
	"rule nat-output jump services",
	"rule nat-postrouting jump masquerading",
	"rule services ip daddr . meta l4proto . th dport vmap @service-ips",
	"rule svc ip daddr 10.96.0.1 ip saddr != @pods jump mark-for-masquerade",
	"rule svc meta l4proto tcp dnat ip addr . port to numgen random mod 65536 offset 131072 map @eps",
	"rule mark-for-masquerade mark set mark or 0x4000",
	"rule masquerading ip saddr . ip daddr @hairpin-endpoints jump mark-for-masquerade",
	"rule masquerading mark and 0x4000 != 0 mark set mark xor 0x4000 masquerade fully-random",
	"rule filter-forward ct state new jump checks",
	"rule filter-input ct state new jump checks",
	"rule filter-output ct state new jump checks",
	"rule checks ip daddr . meta l4proto . th dport vmap @no-endpoints",
	"rule filter-input ip daddr 10.200.0.10 tcp dport 30000 drop",
	"rule reject-chain meta l4proto tcp reject with tcp reset",
	"rule reject-chain reject",
	"element pods { 10.244.0.0/16 }",
	"element hairpin-endpoints { 10.244.0.2 . 10.244.0.2 }",
	"element service-ips { 10.96.0.1 . tcp . 80 : goto svc }",
	"element no-endpoints { 10.96.0.2 . tcp . 80 : goto reject-chain }",
	"element no-endpoints { 10.96.0.2 . udp . 53 : goto reject-chain }",
	"element eps { 0-65535 : 10.9.9.9 . 1 }",
	"element eps { 131072-147455 : 10.244.0.2 . 8080 }",
	"element eps { 147456-196607 : 10.244.1.2 . 8080 }",
}

var node = []netip.Addr{netip.MustParseAddr("10.200.0.10")}

func share(ep string, s float64) explain.Share {
	return explain.Share{Endpoint: netip.MustParseAddrPort(ep), Share: s}
}

type traceCase struct {
	name  string
	extra []string // lines added to base
	pkt   string
	want  explain.Verdict
	path  string // a step the path holds
	err   string // a part of the error, when one is wanted
}

func TestTrace(t *testing.T) {
	forward := func(masq bool, shares ...explain.Share) explain.Verdict {
		return explain.Verdict{Action: explain.Forward, Endpoints: shares, Masquerade: masq}
	}
	uneven := []explain.Share{share("10.244.0.2:8080", 0.25), share("10.244.1.2:8080", 0.75)}
	for _, tc := range []traceCase{
		{name: "pod: shares are interval sizes over the block", pkt: "tcp 10.244.0.5 -> 10.96.0.1:80",
			want: forward(false, uneven...), path: "forward/filter-forward"},
		{name: "client elsewhere is masqueraded", pkt: "tcp 192.0.2.1 -> 10.96.0.1:80",
			want: forward(true, uneven...), path: "masquerade"},
		{name: "node takes the output hook", pkt: "tcp 10.200.0.10 -> 10.96.0.1:80",
			want: forward(true, uneven...), path: "output/nat-output"},
		{name: "loopback is the node", pkt: "tcp 127.0.0.1 -> 10.96.0.1:80",
			want: forward(true, uneven...), path: "output/filter-output"},
		{name: "hairpin is not reported", pkt: "tcp 10.244.0.2 -> 10.96.0.1:80",
			want: forward(false, uneven...), path: "@hairpin-endpoints: hairpin, not reported"},
		{name: "a marked packet delivered locally still counts as masqueraded", pkt: "tcp 192.0.2.1 -> 10.96.0.4:80",
			extra: []string{
				"chain svc-host", "element service-ips { 10.96.0.4 . tcp . 80 : goto svc-host }",
				"rule svc-host jump mark-for-masquerade", "rule svc-host meta l4proto tcp dnat to 10.200.0.10:8080",
			},
			want: forward(true, share("10.200.0.10:8080", 1)), path: "marked for masquerade, delivered locally: no postrouting"},
		{name: "no endpoints: reject", pkt: "tcp 10.244.0.5 -> 10.96.0.2:80",
			want: explain.Verdict{Action: explain.Reject}, path: "reject"},
		{name: "udp passes the tcp reset to the plain reject", pkt: "udp 10.244.0.5 -> 10.96.0.2:53",
			want: explain.Verdict{Action: explain.Reject}},
		{name: "unknown address passes", pkt: "tcp 10.244.0.5 -> 10.96.0.3:80",
			want: explain.Verdict{Action: explain.Pass}},
		{name: "a local destination takes the input hook", pkt: "tcp 192.0.2.1 -> 10.200.0.10:30000",
			want: explain.Verdict{Action: explain.Drop}, path: "input/filter-input"},
		{name: "the node's packet to itself is delivered over loopback", pkt: "tcp 10.200.0.10 -> 10.200.0.10:30000",
			want: explain.Verdict{Action: explain.Drop}, path: "route: local"},
		{name: "base chain policy drop", pkt: "tcp 10.244.0.5 -> 10.96.0.3:80",
			extra: []string{"chain strict { type filter hook forward priority 10 ; policy drop ; }"},
			want:  explain.Verdict{Action: explain.Drop}, path: "strict: policy drop"},
		{name: "filter before NAT sees the service address", pkt: "tcp 192.0.2.200 -> 10.96.0.1:80",
			extra: []string{
				"chain pre { type filter hook prerouting priority -110 ; }", "chain fw",
				"rule pre ip daddr 10.96.0.1 tcp dport 80 jump fw",
				"rule fw ip saddr 192.0.2.0/25 return", "rule fw drop",
			},
			want: explain.Verdict{Action: explain.Drop}},
		{name: "an allowed source returns from the firewall", pkt: "tcp 192.0.2.5 -> 10.96.0.1:80",
			extra: []string{
				"chain pre { type filter hook prerouting priority -110 ; }", "chain fw",
				"rule pre ip daddr 10.96.0.1 tcp dport 80 jump fw",
				"rule fw ip saddr 192.0.2.0/25 return", "rule fw drop",
			},
			want: forward(true, uneven...)},
		{name: "filter after NAT sees the endpoint", pkt: "tcp 10.244.0.5 -> 10.96.0.1:80",
			extra: []string{"chain late { type filter hook forward priority 10 ; }", "rule late ip daddr 10.244.1.2 drop"},
			err:   "branches end differently: drop 75.0%, forward 25.0%"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			check(t, load(t, knftables.IPv4Family, slices.Concat(base, tc.extra)...), tc)
		})
	}
}

func check(t *testing.T, f *knftables.Fake, tc traceCase) {
	t.Helper()
	pkt, err := explain.ParsePacket(tc.pkt)
	if err != nil {
		t.Fatal(err)
	}
	got, err := Tracer{Fake: f, Local: node}.Trace(pkt)
	if tc.err != "" {
		if err == nil || !strings.Contains(err.Error(), tc.err) {
			t.Fatalf("error %v, want one holding %q", err, tc.err)
		}
		return
	}
	if err != nil {
		t.Fatal(err)
	}
	if d := explain.Diff(tc.want, got); len(d) > 0 {
		t.Errorf("%s\n  got:  %s\n  path: %s", strings.Join(d, "; "), got, strings.Join(got.Path, " > "))
	}
	if tc.path != "" && !slices.Contains(got.Path, tc.path) {
		t.Errorf("path %q does not hold %q", strings.Join(got.Path, " > "), tc.path)
	}
}

// affinity is the mode's ClientIP cascade: a recorded client goes back
// to its endpoint, a new one draws 1/2 then the rest.
var affinity = []string{
	"chain nat-prerouting { type nat hook prerouting priority -100 ; }",
	"chain svc", "chain ep-a", "chain ep-b",
	"set aff-a { type ipv4_addr ; flags dynamic,timeout ; timeout 10800s ; }",
	"set aff-b { type ipv4_addr ; flags dynamic,timeout ; timeout 10800s ; }",
	"rule nat-prerouting ip daddr 10.96.0.1 goto svc",
	"rule svc ip saddr @aff-a goto ep-a",
	"rule svc ip saddr @aff-b goto ep-b",
	"rule svc numgen random mod 2 0 goto ep-a",
	"rule svc goto ep-b",
	"rule ep-a update @aff-a { ip saddr }",
	"rule ep-a meta l4proto tcp dnat to 10.244.0.2:8080",
	"rule ep-b update @aff-b { ip saddr }",
	"rule ep-b meta l4proto tcp dnat to 10.244.0.3:8080",
}

func TestTraceAffinity(t *testing.T) {
	both := explain.Verdict{Action: explain.Forward, AffinitySeconds: 10800,
		Endpoints: []explain.Share{share("10.244.0.2:8080", 0.5), share("10.244.0.3:8080", 0.5)}}
	for _, tc := range []traceCase{
		{name: "a new client draws", pkt: "tcp 10.244.0.5 -> 10.96.0.1:80", want: both, path: "update @aff-a"},
		{name: "a recorded client keeps its endpoint", pkt: "tcp 10.244.0.5 -> 10.96.0.1:80",
			extra: []string{"element aff-b { 10.244.0.5 }"},
			want: explain.Verdict{Action: explain.Forward, AffinitySeconds: 10800,
				Endpoints: []explain.Share{share("10.244.0.3:8080", 1)}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			check(t, load(t, knftables.IPv4Family, slices.Concat(affinity, tc.extra)...), tc)
		})
	}
}

func TestTraceIPv6(t *testing.T) {
	f := load(t, knftables.IPv6Family,
		"chain nat-prerouting { type nat hook prerouting priority -100 ; }",
		"chain nat-postrouting { type nat hook postrouting priority 100 ; }",
		"chain svc",
		"map eps { typeof numgen random mod 65536 : ip6 daddr . tcp dport ; flags interval ; }",
		"map ports { type inet_proto . inet_service : verdict ; }",
		"rule nat-prerouting ip6 daddr fd00:96::1 meta l4proto . th dport vmap @ports",
		"element ports { tcp . 80 : goto svc }",
		"rule nat-postrouting ip6 saddr != fd00:244::/64 masquerade",
		"rule svc meta l4proto tcp dnat ip6 addr . port to numgen random mod 65536 map @eps",
		"element eps { 0-32767 : fd00:244::2 . 8080 }",
		"element eps { 32768-65535 : fd00:244::3 . 8080 }",
	)
	even := []explain.Share{share("[fd00:244::2]:8080", 0.5), share("[fd00:244::3]:8080", 0.5)}
	for _, tc := range []traceCase{
		{name: "pod", pkt: "tcp fd00:244::5 -> [fd00:96::1]:80", want: explain.Verdict{Action: explain.Forward, Endpoints: even}},
		{name: "elsewhere", pkt: "tcp 2001:db8::1 -> [fd00:96::1]:80",
			want: explain.Verdict{Action: explain.Forward, Endpoints: even, Masquerade: true}},
		{name: "other port", pkt: "tcp fd00:244::5 -> [fd00:96::1]:81", want: explain.Verdict{Action: explain.Pass}},
		{name: "an IPv4 packet never reaches an ip6 table", pkt: "tcp 10.0.0.1 -> 10.0.0.2:80", err: "never reaches an ip6 table"},
	} {
		t.Run(tc.name, func(t *testing.T) { check(t, f, tc) })
	}
}

// TestTraceRefuses: what the tracer does not understand, or a table the
// kernel would refuse, is an error, never a guess.
func TestTraceRefuses(t *testing.T) {
	for _, tc := range []struct{ rule, err string }{
		{"ip daddr 10.96.0.1 counter", `unsupported expression "counter"`},
		{"ip daddr { 10.96.0.1, 10.96.0.2 } drop", "anonymous sets"},
		{"ip dscp 4 drop", `unsupported expression "ip dscp"`},
		{"drop counter", "after the verdict"},
		{"jump gone", "missing chain gone"},
		{"jump loop", "nested jumps"},
		{"ct state established,new ct mark 1 drop", `want "state"`},
		{"fib daddr . iif type local drop", `want "type"`},
		{"fib daddr type unicast drop", "unsupported fib type"},
		{"meta l4proto . th dport 80 drop", "concatenation compared"},
		{"numgen counter mod 2 0 drop", `numgen "counter"`},
		{"snat to 10.0.0.1", `unsupported expression "snat"`},
	} {
		t.Run(tc.rule, func(t *testing.T) {
			f := load(t, knftables.IPv4Family,
				"chain pre { type filter hook prerouting priority 0 ; }", "chain loop",
				"chain gone", "rule loop jump loop", "rule pre "+tc.rule)
			// The Fake refuses dangling references; a table edited by hand
			// can still hold one.
			delete(f.Table.Chains, "gone")
			_, err := Tracer{Fake: f, Local: node}.Trace(explain.Packet{Protocol: dataplane.TCP,
				Src: netip.MustParseAddr("192.0.2.1"), Dst: netip.MustParseAddr("10.96.0.1"), Port: 80})
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("error %v, want one holding %q", err, tc.err)
			}
		})
	}
}
