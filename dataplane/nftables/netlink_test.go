package nftables

import (
	"encoding/hex"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/switchyard-proxy/switchyard/dataplane/dataplanetest"
	"github.com/switchyard-proxy/switchyard/dataplane/internal/sorted"

	"github.com/google/go-cmp/cmp"
	gnft "github.com/google/nftables"
	"github.com/google/nftables/expr"
	"github.com/mdlayher/netlink"
	"golang.org/x/sys/unix"

	"github.com/switchyard-proxy/switchyard/dataplane"
	switchyardv1 "github.com/switchyard-proxy/switchyard/proto/switchyard/v1"
)

// The expressions below are what "nft --debug=netlink -f" (nft 1.0.6)
// printed for the same text; e2e/dataplane/nftables checks the result
// against the kernel's listing.
func TestParseRuleShapes(t *testing.T) {
	saddr4 := &expr.Payload{DestRegister: 1, Base: expr.PayloadBaseNetworkHeader, Offset: 12, Len: 4}
	daddr4 := &expr.Payload{DestRegister: 1, Base: expr.PayloadBaseNetworkHeader, Offset: 16, Len: 4}
	saddr6 := &expr.Payload{DestRegister: 1, Base: expr.PayloadBaseNetworkHeader, Offset: 8, Len: 16}
	daddr6 := &expr.Payload{DestRegister: 1, Base: expr.PayloadBaseNetworkHeader, Offset: 24, Len: 16}
	gotoEP := &expr.Verdict{Kind: expr.VerdictGoto, Chain: "ep-X"}
	jumpMasq := &expr.Verdict{Kind: expr.VerdictJump, Chain: "mark-for-masquerade"}
	tcp := []expr.Any{&expr.Meta{Key: expr.MetaKeyL4PROTO, Register: 1}, &expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: []byte{6}}}
	for _, tc := range []struct {
		fam  dataplane.Family
		rule string
		want []expr.Any
	}{
		{dataplane.IPv4, "goto ep-X", []expr.Any{gotoEP}},
		{dataplane.IPv4, "jump mark-for-masquerade", []expr.Any{jumpMasq}},
		{dataplane.IPv4, "drop", []expr.Any{&expr.Verdict{Kind: expr.VerdictDrop}}},
		{dataplane.IPv4, "numgen random mod 3 0 goto ep-X", []expr.Any{
			&expr.Numgen{Register: 1, Modulus: 3, Type: unix.NFT_NG_RANDOM},
			&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: []byte{0, 0, 0, 0}}, gotoEP}},
		{dataplane.IPv4, "ip saddr 10.128.0.1 jump mark-for-masquerade", []expr.Any{
			saddr4, &expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: []byte{10, 128, 0, 1}}, jumpMasq}},
		{dataplane.IPv4, "ip daddr 10.96.0.10 ip saddr != @cluster-cidrs jump mark-for-masquerade", []expr.Any{
			daddr4, &expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: []byte{10, 96, 0, 10}},
			saddr4, &expr.Lookup{SourceRegister: 1, SetName: "cluster-cidrs", Invert: true}, jumpMasq}},
		{dataplane.IPv4, "ip saddr @affinity-X goto ep-X", []expr.Any{
			saddr4, &expr.Lookup{SourceRegister: 1, SetName: "affinity-X"}, gotoEP}},
		{dataplane.IPv4, "update @affinity-X { ip saddr }", []expr.Any{
			saddr4, &expr.Dynset{SrcRegKey: 1, SetName: "affinity-X", Operation: unix.NFT_DYNSET_OP_UPDATE}}},
		{dataplane.IPv4, "meta l4proto tcp dnat to 10.128.0.1:8080", append(tcp,
			&expr.Immediate{Register: 1, Data: []byte{10, 128, 0, 1}},
			&expr.Immediate{Register: 2, Data: []byte{0x1f, 0x90}},
			&expr.NAT{Type: expr.NATTypeDestNAT, Family: unix.NFPROTO_IPV4, RegAddrMin: 1, RegProtoMin: 2, Specified: true})},
		{dataplane.IPv6, "ip6 daddr fd00::10 ip6 saddr fd00::1 jump mark-for-masquerade", []expr.Any{
			daddr6, &expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: []byte{0xfd, 15: 0x10}},
			saddr6, &expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: []byte{0xfd, 15: 1}}, jumpMasq}},
		{dataplane.IPv6, "meta l4proto tcp dnat to [fd00::1]:8080", append(tcp,
			&expr.Immediate{Register: 1, Data: []byte{0xfd, 15: 1}},
			&expr.Immediate{Register: 2, Data: []byte{0x1f, 0x90}},
			&expr.NAT{Type: expr.NATTypeDestNAT, Family: unix.NFPROTO_IPV6, RegAddrMin: 1, RegProtoMin: 2, Specified: true})},
	} {
		got, err := parseRule(tc.fam, tc.rule)
		if err != nil {
			t.Errorf("%q: %v", tc.rule, err)
			continue
		}
		if d := cmp.Diff(tc.want, got); d != "" {
			t.Errorf("%q (-want +got):\n%s", tc.rule, d)
		}
	}
}

func TestParseRuleRejectsUnknownShapes(t *testing.T) {
	for _, rule := range []string{
		"", "ip saddr 10.0.0.0/8 return", "fib saddr type local jump mark-for-masquerade",
		"ct state new jump services", "mark set mark or 0x4000", "reject", "meta l4proto tcp reject with tcp reset",
		"dnat to 10.0.0.1:80", "meta l4proto tcp dnat to 10.0.0.1", "ip saddr fd00::1 jump x",
		"numgen random mod 3 1 goto x", "numgen random mod 03 0 goto x", "goto", "goto a b",
		"ip daddr . meta l4proto . th dport vmap @service-ips", "masquerade fully-random",
		"ip saddr 10.0.0.1  jump x", "counter goto x", "meta l4proto icmp dnat to 10.0.0.1:1",
		"update @a { ip daddr }", "goto \"quoted\"",
	} {
		if _, err := parseRule(dataplane.IPv4, rule); !errors.Is(err, errNoNetlink) {
			t.Errorf("%q: got %v, want errNoNetlink", rule, err)
		}
	}
}

// The keys nft printed for "10.96.0.10 . tcp . 80" and "tcp . 30080"
// ("0a00600a 00000006 00005000", "00000006 00008075": libnftnl prints
// host-order 32-bit words, so the bytes are these).
func TestConcatKeyMatchesNft(t *testing.T) {
	for _, tc := range []struct {
		typ, key, want string
	}{
		{"ipv4_addr . inet_proto . inet_service", "10.96.0.10 . tcp . 80", "0a60000a" + "06000000" + "00500000"},
		{"inet_proto . inet_service", "tcp . 30080", "06000000" + "75800000"},
	} {
		got, err := concatKey(dataplane.IPv4, strings.Split(tc.typ, " . "), strings.Split(tc.key, " . "))
		if err != nil || hex.EncodeToString(got) != tc.want {
			t.Errorf("%s: got %x, %v; want %s", tc.key, got, err, tc.want)
		}
	}
}

// capture is a google/nftables test dial that records the message types
// of every batch and acknowledges them.
type capture struct {
	mu      sync.Mutex
	batches [][]uint16
}

func (c *capture) dialer() NetlinkDialer {
	return func(...gnft.ConnOption) (*gnft.Conn, error) { // no socket to size
		return gnft.New(gnft.WithTestDial(func(req []netlink.Message) ([]netlink.Message, error) {
			var types []uint16
			for _, m := range req {
				types = append(types, uint16(m.Header.Type)&0xff)
			}
			c.mu.Lock()
			c.batches = append(c.batches, types)
			c.mu.Unlock()
			return req, nil
		}))
	}
}

func TestPartialSyncGoesOverNetlinkOrFallsBack(t *testing.T) {
	b := newFakeBed(t, dataplane.IPv4)
	capt := &capture{}
	b.dp.cfg.PartialNetlink = capt.dialer()
	a := benchService(1, 3, false)
	b.apply(t, stateOf(a), false) // first sync: full, nft
	if s := b.dp.LastSync(); s.Netlink != 0 || !s.Full {
		t.Fatalf("first sync: %+v", s)
	}
	b.rec[dataplane.IPv4].take()

	// One endpoint moves: all operations are known shapes.
	b.apply(t, stateOf(benchService(1, 3, true)), false)
	s := b.dp.LastSync()
	if s.Netlink != 1 || s.NetlinkFallbacks != 0 || s.Transactions != 1 || s.Operations == 0 {
		t.Fatalf("endpoint move: %+v", s)
	}
	if txs := b.rec[dataplane.IPv4].take(); len(txs) != 0 {
		t.Fatalf("nft ran for a netlink sync: %q", txs)
	}
	capt.mu.Lock()
	n := len(capt.batches)
	capt.mu.Unlock()
	if n == 0 {
		t.Fatal("no netlink message sent")
	}

	// A service with affinity adds its sets over netlink too.
	sticky := benchService(2, 2, false)
	sticky.SessionAffinity = switchyardv1.SessionAffinity_SESSION_AFFINITY_CLIENT_IP
	sticky.SessionAffinityTimeoutSeconds = 600
	b.apply(t, stateOf(benchService(1, 3, true), sticky), false)
	if s = b.dp.LastSync(); s.Netlink != 1 || s.NetlinkFallbacks != 0 {
		t.Fatalf("affinity service: %+v", s)
	}
	if txs := b.rec[dataplane.IPv4].take(); len(txs) != 0 {
		t.Fatalf("nft ran for a netlink sync: %q", txs)
	}

	// Load-balancer source ranges need prefix matches: not translated,
	// nft runs.
	lb := benchService(3, 2, false)
	lb.Type = switchyardv1.ServiceType_SERVICE_TYPE_LOAD_BALANCER
	lb.LoadBalancerIps = []string{"192.0.2.10"}
	lb.LoadBalancerSourceRanges = []string{"198.51.100.0/24"}
	lb.Ports[0].NodePort = 30003
	b.apply(t, stateOf(benchService(1, 3, true), sticky, lb), false)
	s = b.dp.LastSync()
	if s.Netlink != 0 || s.NetlinkFallbacks != 1 || s.Transactions != 1 {
		t.Fatalf("source ranges: %+v", s)
	}
	if txs := b.rec[dataplane.IPv4].take(); len(txs) != 1 || !strings.Contains(txs[0], "198.51.100.0/24") {
		t.Fatalf("want one nft transaction with the source range, got %q", txs)
	}
}

// Every rule of the goldens' per-service chains is either translated or
// one of the shapes left to nft.
func TestGoldenServiceRulesTranslate(t *testing.T) {
	for _, name := range dataplanetest.Cases(t, "testdata/*/want.nft") {
		checkServiceRules(t, dataplanetest.LoadState(t, name))
	}
}

func checkServiceRules(t *testing.T, st *dataplane.State) {
	for _, fam := range []dataplane.Family{dataplane.IPv4, dataplane.IPv6} {
		rs, err := Render(st, fam)
		if err != nil {
			t.Fatal(err)
		}
		for _, n := range sorted.Keys(rs.Chains) {
			if !isServiceObject(n) {
				continue
			}
			for _, r := range rs.Chains[n].Rules {
				text := r.String()
				_, err := parseRule(fam, text)
				// Left to nft: fib, source ranges, and the choice of the
				// opt-in algorithms (round-robin, maglev, source-hash),
				// whose rule changes only with the endpoint count or the
				// table size; their map elements go over netlink.
				known := strings.HasPrefix(text, "fib ") || strings.Contains(text, "/") && strings.HasSuffix(text, " return") ||
					strings.Contains(text, " to jhash ") || strings.Contains(text, " to numgen inc ")
				if err != nil && !known {
					t.Errorf("%s %s: %q: %v", fam, n, text, err)
				}
			}
		}
	}
}

// TestPushBoundsElementsPerMessage: a set's elements travel in one
// nested attribute with a 16-bit length, so merged runs are cut at
// maxElemsPerMessage.
func TestPushBoundsElementsPerMessage(t *testing.T) {
	b := &nlBatch{}
	set := &gnft.Set{Name: "hairpin-endpoints"}
	for i := range 2*maxElemsPerMessage + 1 {
		b.push(elemStep(set, true, gnft.SetElement{Key: []byte{byte(i), 0, 0, 0}}))
	}
	b.push(elemStep(&gnft.Set{Name: "other"}, true, gnft.SetElement{Key: []byte{1, 0, 0, 0}}))
	var sizes []int
	for _, q := range b.queue {
		sizes = append(sizes, len(q.elems))
	}
	if want := []int{maxElemsPerMessage, maxElemsPerMessage, 1, 1}; !slices.Equal(sizes, want) {
		t.Errorf("elements per message = %v, want %v", sizes, want)
	}
}
