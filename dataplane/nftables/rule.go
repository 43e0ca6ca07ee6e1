package nftables

import (
	"net/netip"
	"strconv"

	"github.com/google/nftables/expr"
	"golang.org/x/sys/unix"

	"github.com/switchyard-proxy/switchyard/dataplane"
)

// Rule is one rule of a chain, in a typed form for the shapes the
// netlink channel writes: matches and a statement (terms), from which
// String writes the nft text (what the nft channel sends, and what the
// goldens hold) and exprs builds the netlink expressions directly. A rule
// without a form (textRule: ct state, fib, reject, mark, masquerade,
// lookups on concatenations, prefix matches) holds its text alone and
// makes a partial transaction that writes it run through nft.
//
// The form is a fixed array, not a slice: a Rule stays comparable (chains
// compare with slices.Equal), rendering allocates nothing for it, and a
// rule is about as large as its text was (144 bytes against a string
// header and 60-110 bytes of text); the text is written only for the
// rules a transaction sends.
type Rule struct {
	terms [maxTerms]term // unused terms are zero; a text-only rule is one tText
}

// maxTerms is the longest form rendered: "ip daddr A ip saddr != @S jump C".
const maxTerms = 3

// termKind is one match or statement of a rule's form. The form is
// { match } [ statement ]:
//
//	match     = IP ("saddr"|"daddr") ( ADDR | "@"SET | "!=" "@"SET )
//	          | "numgen random mod" N "0"
//	          | "meta l4proto" ("tcp"|"udp"|"sctp")
//	statement = ("goto"|"jump") CHAIN | "drop" | "return"
//	          | "update @"SET "{" IP "saddr }"
//	          | "dnat to" ADDR:PORT        (after a meta l4proto match)
//	          | "dnat" IP "addr . port to numgen random mod 65536"
//	                 [ "offset" N ] "map @"SET  (the same)
//
// IP is "ip" or "ip6" by family; ADDR is a plain address of the family.
type termKind uint8

const (
	tNone     termKind = iota
	tText              // a whole rule outside the form, as text
	tAddr              // IP saddr|daddr ADDR
	tInSet             // IP saddr|daddr @SET
	tNotInSet          // IP saddr|daddr != @SET
	tNumgen            // numgen random mod N 0
	tL4                // meta l4proto P
	tJump              // jump CHAIN
	tGoto              // goto CHAIN
	tDrop              // drop
	tUpdate            // update @SET { IP saddr }
	tDnat              // dnat to ADDR:PORT
	tDnatMap           // dnat IP addr . port to numgen … map @SET
)

// term is one match or statement.
type term struct {
	name string     // set, chain or protocol; a tText rule's text
	addr netip.Addr // tAddr, tDnat
	n    uint32     // numgen modulus, dnat port, endpoint-map offset
	kind termKind
	dst  bool // address terms: daddr, not saddr
	ip6  bool // the rule's family is IPv6 ("ip6")
}

func addrIs(dst bool, a netip.Addr) term  { return term{kind: tAddr, dst: dst, addr: a} }
func addrIn(dst bool, set string) term    { return term{kind: tInSet, dst: dst, name: set} }
func addrNotIn(dst bool, set string) term { return term{kind: tNotInSet, dst: dst, name: set} }
func numgenZero(mod uint32) term          { return term{kind: tNumgen, n: mod} }
func l4proto(p string) term               { return term{kind: tL4, name: p} }
func jumpTo(chain string) term            { return term{kind: tJump, name: chain} }
func gotoTo(chain string) term            { return term{kind: tGoto, name: chain} }
func dropIt() term                        { return term{kind: tDrop} }
func updateSaddr(set string) term         { return term{kind: tUpdate, name: set} }
func dnatTo(ap netip.AddrPort) term       { return term{kind: tDnat, addr: ap.Addr(), n: uint32(ap.Port())} }
func dnatThrough(offset uint32, m string) term {
	return term{kind: tDnatMap, name: m, n: offset}
}

// textRule is a rule nft alone writes.
func textRule(text string) Rule { return Rule{terms: [maxTerms]term{{kind: tText, name: text}}} }

// newRule is the rule of a form in family fam. A form the netlink channel
// could not write as nft would (an address of the other family, a name
// nft would need quoted, a dnat without its protocol match…) becomes a
// text-only rule with the same text, so it goes through nft.
func newRule(fam dataplane.Family, ts ...term) Rule {
	for i := range ts {
		ts[i].ip6 = fam == dataplane.IPv6
	}
	if len(ts) > maxTerms || !formValid(fam, ts) {
		return textRule(string(appendTerms(make([]byte, 0, 112), ts)))
	}
	var r Rule
	copy(r.terms[:], ts)
	return r
}

// Equal reports whether two rules are one rule (go-cmp uses it: the form
// is unexported).
func (r Rule) Equal(o Rule) bool { return r == o }

// form returns the terms in use; nil for a text-only rule.
func (r *Rule) form() []term {
	if r.terms[0].kind == tText {
		return nil
	}
	n := 0
	for n < maxTerms && r.terms[n].kind != tNone {
		n++
	}
	return r.terms[:n]
}

// text returns a text-only rule's text.
func (r *Rule) text() (string, bool) {
	if t := r.terms[0]; t.kind == tText {
		return t.name, true
	}
	return "", false
}

// String is the rule's nft text.
func (r Rule) String() string {
	if s, ok := r.text(); ok {
		return s
	}
	return string(appendTerms(make([]byte, 0, 112), r.form()))
}

// appendTerms writes terms as nft text, separated by spaces.
func appendTerms(b []byte, ts []term) []byte {
	for i, t := range ts {
		if i > 0 {
			b = append(b, ' ')
		}
		b = t.appendText(b)
	}
	return b
}

// formValid checks what the netlink expressions assume of a form: plain
// addresses of the family, names nft writes unquoted, a known protocol
// before a dnat, a statement only last.
func formValid(fam dataplane.Family, ts []term) bool {
	plain := func(a netip.Addr) bool { return a.IsValid() && a.Zone() == "" && fam.Has(a) && !a.Is4In6() }
	l4 := false
	for i, t := range ts {
		last := i == len(ts)-1
		ok := true
		switch t.kind {
		case tAddr:
			ok = plain(t.addr)
		case tInSet, tNotInSet:
			ok = validName(t.name)
		case tNumgen:
			ok = t.n > 0
		case tL4:
			_, ok = protoNumber[t.name]
			l4 = l4 || ok
		case tJump, tGoto, tUpdate:
			ok = last && validName(t.name)
		case tDrop:
			ok = last
		case tDnat:
			ok = last && l4 && t.n > 0 && t.n <= 0xffff && plain(t.addr)
		case tDnatMap:
			ok = last && l4 && validName(t.name)
		default:
			ok = false
		}
		if !ok {
			return false
		}
	}
	return len(ts) > 0
}

func (t term) family() dataplane.Family {
	if t.ip6 {
		return dataplane.IPv6
	}
	return dataplane.IPv4
}

func (t term) appendText(b []byte) []byte {
	ip := ipKeyword(t.family())
	dir := func(b []byte) []byte {
		b = append(b, ip...)
		if t.dst {
			return append(b, " daddr "...)
		}
		return append(b, " saddr "...)
	}
	switch t.kind {
	case tText:
		return append(b, t.name...)
	case tAddr:
		return t.addr.AppendTo(dir(b))
	case tInSet:
		return append(append(dir(b), '@'), t.name...)
	case tNotInSet:
		return append(append(dir(b), "!= @"...), t.name...)
	case tNumgen:
		return append(strconv.AppendUint(append(b, "numgen random mod "...), uint64(t.n), 10), " 0"...)
	case tL4:
		return append(append(b, "meta l4proto "...), t.name...)
	case tJump:
		return append(append(b, "jump "...), t.name...)
	case tGoto:
		return append(append(b, "goto "...), t.name...)
	case tDrop:
		return append(b, "drop"...)
	case tUpdate:
		b = append(append(append(b, "update @"...), t.name...), " { "...)
		return append(append(b, ip...), " saddr }"...)
	case tDnat:
		return append(append(b, "dnat to "...), dnatTarget(netip.AddrPortFrom(t.addr, uint16(t.n)))...)
	case tDnatMap:
		b = append(append(append(b, "dnat "...), ip...), " addr . port to numgen random mod "...)
		b = strconv.AppendUint(b, slots, 10)
		if t.n > 0 {
			b = strconv.AppendUint(append(b, " offset "...), uint64(t.n), 10)
		}
		return append(append(b, " map @"...), t.name...)
	}
	return b
}

// refs calls chain for each chain the rule jumps or goes to, then set
// for each set or map it names, in the order of its text.
func (r *Rule) refs(chain, set func(string)) {
	if s, ok := r.text(); ok {
		for _, n := range chainRefs(s) {
			chain(n)
		}
		for _, n := range setRefs(s) {
			set(n)
		}
		return
	}
	ts := r.form()
	for _, t := range ts {
		if t.kind == tJump || t.kind == tGoto {
			chain(t.name)
		}
	}
	for _, t := range ts {
		if t.kind == tInSet || t.kind == tNotInSet || t.kind == tUpdate || t.kind == tDnatMap {
			set(t.name)
		}
	}
}

// exprs returns the expressions nft 1.0.6 generates for the rule's text
// (checked against "nft --debug=netlink" and, in e2e/dataplane/nftables,
// against the kernel's listing), or false for a text-only rule. Every
// match loads into register 1, as nft does.
func (r *Rule) exprs() ([]expr.Any, bool) {
	ts := r.form()
	if len(ts) == 0 {
		return nil, false
	}
	out := make([]expr.Any, 0, 2*len(ts))
	for _, t := range ts {
		out = t.appendExprs(out)
	}
	return out, true
}

func (t term) appendExprs(out []expr.Any) []expr.Any {
	fam := t.family()
	which := "saddr"
	if t.dst {
		which = "daddr"
	}
	switch t.kind {
	case tAddr:
		return append(out, loadAddr(fam, which), &expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: t.addr.AsSlice()})
	case tInSet, tNotInSet:
		return append(out, loadAddr(fam, which), &expr.Lookup{SourceRegister: 1, SetName: t.name, Invert: t.kind == tNotInSet})
	case tNumgen:
		return append(out, &expr.Numgen{Register: 1, Modulus: t.n, Type: unix.NFT_NG_RANDOM},
			&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: []byte{0, 0, 0, 0}})
	case tL4:
		return append(out, &expr.Meta{Key: expr.MetaKeyL4PROTO, Register: 1},
			&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: []byte{protoNumber[t.name]}})
	case tJump:
		return append(out, &expr.Verdict{Kind: expr.VerdictJump, Chain: t.name})
	case tGoto:
		return append(out, &expr.Verdict{Kind: expr.VerdictGoto, Chain: t.name})
	case tDrop:
		return append(out, &expr.Verdict{Kind: expr.VerdictDrop})
	case tUpdate:
		return append(out, loadAddr(fam, "saddr"),
			&expr.Dynset{SrcRegKey: 1, SetName: t.name, Operation: uint32(unix.NFT_DYNSET_OP_UPDATE)})
	case tDnat:
		return append(out, dnat(fam, netip.AddrPortFrom(t.addr, uint16(t.n)))...)
	case tDnatMap:
		return append(out, dnatMap(fam, t.n, t.name)...)
	}
	return out
}
