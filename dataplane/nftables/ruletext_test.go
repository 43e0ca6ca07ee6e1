package nftables

import (
	"net/netip"
	"strconv"
	"strings"

	"github.com/google/nftables/expr"
	"golang.org/x/sys/unix"

	"github.com/switchyard-proxy/switchyard/dataplane"
)

// The rules' text read back into expressions: the test oracle the typed
// forms (rule.go) are checked against, and how the fake kernel of the
// drift tests holds the rules of a knftables.Fake. It was the netlink
// channel's translation before rules had a form.

// parseRule turns the text of one rule into the expressions nft 1.0.6
// generates for it (checked against "nft --debug=netlink" and, in
// e2e/dataplane/nftables, against the kernel's listing). It knows the
// closed grammar of per-service rules and rejects everything else with
// errNoNetlink:
//
//	rule      = { match } [ statement ]
//	match     = IP ("saddr"|"daddr") ( ADDR | "@"SET | "!=" "@"SET )
//	          | "numgen random mod" N "0"
//	          | "meta l4proto" ("tcp"|"udp"|"sctp")
//	statement = ("goto"|"jump") CHAIN | "drop" | "return"
//	          | "update @"SET "{" IP "saddr }"
//	          | "dnat to" ADDR:PORT        (after a meta l4proto match)
//	          | "dnat" IP "addr . port to numgen random mod 65536"
//	                 [ "offset" N ] "map @"SET
//	                                       (the same)
//
// IP is "ip" or "ip6" by family; ADDR is a plain address (no prefix).
// Every match loads into register 1, as nft does; a dnat uses register 1
// for the address and 2 for the port.
func parseRule(fam dataplane.Family, rule string) ([]expr.Any, error) {
	tok := strings.Split(rule, " ")
	var out []expr.Any
	l4 := false
	for i := 0; i < len(tok); {
		rest := tok[i:]
		switch {
		case len(rest) >= 3 && rest[0] == ipKeyword(fam) && (rest[1] == "saddr" || rest[1] == "daddr"):
			out = append(out, loadAddr(fam, rest[1]))
			switch {
			case rest[2] == "!=" && len(rest) >= 4 && isSetRef(rest[3]):
				out = append(out, &expr.Lookup{SourceRegister: 1, SetName: rest[3][1:], Invert: true})
				i += 4
			case isSetRef(rest[2]):
				out = append(out, &expr.Lookup{SourceRegister: 1, SetName: rest[2][1:]})
				i += 3
			default:
				a, err := familyAddr(fam, rest[2])
				if err != nil {
					return nil, err
				}
				out = append(out, &expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: a.AsSlice()})
				i += 3
			}
		case len(rest) >= 5 && rest[0] == "numgen" && rest[1] == "random" && rest[2] == "mod" && rest[4] == "0":
			n, err := strconv.ParseUint(rest[3], 10, 32)
			if err != nil || n == 0 || strconv.FormatUint(n, 10) != rest[3] {
				return nil, unsupported("numgen modulus %q", rest[3])
			}
			out = append(out,
				&expr.Numgen{Register: 1, Modulus: uint32(n), Type: unix.NFT_NG_RANDOM},
				&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: []byte{0, 0, 0, 0}})
			i += 5
		case len(rest) >= 3 && rest[0] == "meta" && rest[1] == "l4proto":
			p, ok := protoNumber[rest[2]]
			if !ok {
				return nil, unsupported("protocol %q", rest[2])
			}
			out = append(out,
				&expr.Meta{Key: expr.MetaKeyL4PROTO, Register: 1},
				&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: []byte{p}})
			l4 = true
			i += 3
		case len(rest) == 6 && rest[0] == "update" && isSetRef(rest[1]) && rest[2] == "{" &&
			rest[3] == ipKeyword(fam) && rest[4] == "saddr" && rest[5] == "}":
			out = append(out, loadAddr(fam, "saddr"),
				&expr.Dynset{SrcRegKey: 1, SetName: rest[1][1:], Operation: uint32(unix.NFT_DYNSET_OP_UPDATE)})
			i += 6
		case len(rest) >= 12 && l4 && strings.Join(rest[:10], " ") ==
			"dnat "+ipKeyword(fam)+" addr . port to numgen random mod "+strconv.Itoa(slots):
			var off uint64
			tail := rest[10:]
			if len(tail) == 4 && tail[0] == "offset" {
				var err error
				off, err = strconv.ParseUint(tail[1], 10, 32)
				if err != nil || off == 0 || strconv.FormatUint(off, 10) != tail[1] {
					return nil, unsupported("numgen offset %q", tail[1])
				}
				tail = tail[2:]
			}
			if len(tail) != 2 || tail[0] != "map" || !isSetRef(tail[1]) {
				return nil, unsupported("rule %q", rule)
			}
			out = append(out, dnatMap(fam, uint32(off), tail[1][1:])...)
			i = len(tok)
		case len(rest) == 3 && rest[0] == "dnat" && rest[1] == "to" && l4:
			d, err := textDnat(fam, rest[2])
			if err != nil {
				return nil, err
			}
			out = append(out, d...)
			i += 3
		default:
			v, err := verdict(rest)
			if err != nil {
				return nil, unsupported("rule %q", rule)
			}
			out = append(out, v)
			i = len(tok)
		}
	}
	if len(out) == 0 {
		return nil, unsupported("empty rule")
	}
	return out, nil
}

func isSetRef(s string) bool { return len(s) > 1 && s[0] == '@' && validName(s[1:]) }

// textDnat reads "dnat to ADDR:PORT"'s target.
func textDnat(fam dataplane.Family, s string) ([]expr.Any, error) {
	ap, err := netip.ParseAddrPort(s)
	if err != nil || ap.Port() == 0 || ap.String() != s {
		return nil, unsupported("dnat target %q", s)
	}
	a, err := familyAddr(fam, ap.Addr().String())
	if err != nil {
		return nil, err
	}
	return dnat(fam, netip.AddrPortFrom(a, ap.Port())), nil
}
