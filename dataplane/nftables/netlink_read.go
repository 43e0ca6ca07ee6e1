package nftables

import (
	"encoding/binary"
	"errors"
	"fmt"

	gnft "github.com/google/nftables"
	"github.com/google/nftables/expr"
	"github.com/mdlayher/netlink"
	"golang.org/x/sys/unix"

	"github.com/switchyard-proxy/switchyard/dataplane"
)

// The read-back of a drift check (drift.go): one family's table as the
// kernel holds it, over netlink. The table and its sets are listed
// through google/nftables; chains, rules and elements are dumped and
// decoded here (netlink_dump.go): google/nftables v0.3.0 reads dumps in
// ~4 KiB pieces, asks for one chain's rules per dump (a round trip per
// chain), lists the chains of every table, and silently drops
// expressions it does not know, byteorder among them, which every
// endpoint-map rule holds.

// kernelTable is one family's table as read back: chains by name (with
// their rules in order) and sets and maps by name (with their elements).
type kernelTable struct {
	chains map[string]*kernelChain
	sets   map[string]*kernelSet
	// flowtables are the table's flowtables with their devices.
	flowtables map[string][]string
}

// kernelChain is a chain: base holds "type hook priority" for a base
// chain (baseOf), "" for a regular one.
type kernelChain struct {
	base  string
	rules []kernelRule
}

// kernelRule is one rule's expressions as decoded: google/nftables
// expression types, opaqueExpr for the ones decodeExpr does not know.
type kernelRule struct {
	exprs []any
}

// opaqueExpr is an expression kept by name only.
type opaqueExpr struct{ Name string }

// kernelSet is a set or map with its elements (none read for dynamic
// sets, which the packet path fills).
type kernelSet struct {
	isMap, interval, dynamic bool
	elems                    []rawElem
}

// rawElem is one kernel element: its key and data bytes (for a verdict
// map, the nested verdict attributes) and whether it ends an interval.
type rawElem struct {
	key, val []byte
	end      bool
}

// hookNames are the netfilter hook numbers of the ip and ip6 families.
var hookNames = map[uint32]string{
	unix.NF_INET_PRE_ROUTING: "prerouting", unix.NF_INET_LOCAL_IN: "input", unix.NF_INET_FORWARD: "forward",
	unix.NF_INET_LOCAL_OUT: "output", unix.NF_INET_POST_ROUTING: "postrouting",
}

// dialRaw opens a lasting google/nftables connection through dial and
// returns its netlink socket as well, for the requests google/nftables
// cannot make (the generation, a whole-table rule dump). Both share the
// socket: the caller closes it with c.CloseLasting.
func dialRaw(dial NetlinkDialer) (c *gnft.Conn, raw *netlink.Conn, err error) {
	c, err = dial(gnft.AsLasting(), gnft.WithSockOptions(func(nc *netlink.Conn) error { raw = nc; return nil }))
	if err != nil {
		return nil, nil, fmt.Errorf("open netlink: %w", err)
	}
	if raw == nil {
		_ = c.CloseLasting()
		return nil, nil, errors.New("open netlink: the dialer opened no lasting socket")
	}
	return c, raw, nil
}

// netlinkReader reads tables back over connections from a NetlinkDialer.
type netlinkReader struct {
	dial  NetlinkDialer
	table string
}

func (r netlinkReader) readTable(fam dataplane.Family) (*kernelTable, error) {
	c, raw, err := dialRaw(r.dial)
	if err != nil {
		return nil, err
	}
	defer closeLater(c)
	tf := gnft.TableFamilyIPv4
	if fam == dataplane.IPv6 {
		tf = gnft.TableFamilyIPv6
	}
	if _, err := c.ListTableOfFamily(r.table, tf); err != nil {
		if errors.Is(err, unix.ENOENT) {
			return nil, nil
		}
		return nil, fmt.Errorf("list table %s: %w", r.table, err)
	}
	kt := &kernelTable{sets: map[string]*kernelSet{}, flowtables: map[string][]string{}}
	if kt.chains, err = dumpChains(raw, fam, r.table); err != nil {
		return nil, err
	}
	if err := dumpRules(raw, fam, r.table, kt); err != nil {
		return nil, err
	}
	t := &gnft.Table{Name: r.table, Family: tf}
	fts, err := c.ListFlowtables(t)
	if err != nil {
		return nil, fmt.Errorf("list flowtables: %w", err)
	}
	for _, ft := range fts {
		kt.flowtables[ft.Name] = ft.Devices
	}
	sets, err := c.GetSets(t)
	if err != nil {
		return nil, fmt.Errorf("list sets: %w", err)
	}
	for _, s := range sets {
		ks := &kernelSet{isMap: s.IsMap, interval: s.Interval, dynamic: s.Dynamic}
		kt.sets[s.Name] = ks
		if s.Dynamic {
			continue
		}
		if ks.elems, err = dumpElements(raw, fam, r.table, s.Name); err != nil {
			return nil, err
		}
	}
	return kt, nil
}

var newRuleType = netlink.HeaderType(unix.NFNL_SUBSYS_NFTABLES<<8 | unix.NFT_MSG_NEWRULE)

// dumpRules reads every rule of the table in one dump and appends each
// to its chain, in chain order.
func dumpRules(raw *netlink.Conn, fam dataplane.Family, table string, kt *kernelTable) error {
	msgs, err := dump(raw, unix.NFT_MSG_GETRULE, fam, []netlink.Attribute{tableAttr(unix.NFTA_RULE_TABLE, table)})
	if err != nil {
		return fmt.Errorf("dump rules: %w", err)
	}
	for _, m := range msgs {
		if m.Header.Type != newRuleType || len(m.Data) < 4 {
			continue
		}
		chain, r, err := decodeRule(byte(nfproto(fam)), m.Data[4:])
		if err != nil {
			return fmt.Errorf("decode rule: %w", err)
		}
		if ch := kt.chains[chain]; ch != nil {
			ch.rules = append(ch.rules, r)
		}
	}
	return nil
}

func nfproto(fam dataplane.Family) int {
	if fam == dataplane.IPv6 {
		return unix.NFPROTO_IPV6
	}
	return unix.NFPROTO_IPV4
}

// decodeRule returns the chain and the expressions of one rule message.
func decodeRule(fam byte, b []byte) (string, kernelRule, error) {
	var chain string
	var r kernelRule
	ad, err := nfAttrs(b)
	if err != nil {
		return "", r, err
	}
	for ad.Next() {
		switch ad.Type() {
		case unix.NFTA_RULE_CHAIN:
			chain = ad.String()
		case unix.NFTA_RULE_EXPRESSIONS:
			ad.Nested(func(list *netlink.AttributeDecoder) error {
				for list.Next() {
					list.Nested(func(el *netlink.AttributeDecoder) error {
						e, err := decodeExpr(fam, el)
						r.exprs = append(r.exprs, e)
						return err
					})
				}
				return nil
			})
		}
	}
	return chain, r, ad.Err()
}

// nfAttrs decodes nfnetlink attributes, which are big-endian whatever
// the host (the netlink package decodes in the host's order unless told).
func nfAttrs(b []byte) (*netlink.AttributeDecoder, error) {
	ad, err := netlink.NewAttributeDecoder(b)
	if err != nil {
		return nil, err
	}
	ad.ByteOrder = binary.BigEndian
	return ad, nil
}

// decodeExpr decodes one NFTA_LIST_ELEM: its name, then its data into
// the google/nftables type of that name. An immediate that loads nothing
// into the verdict register is a verdict, as google/nftables decodes it.
func decodeExpr(fam byte, ad *netlink.AttributeDecoder) (any, error) {
	var name string
	var data []byte
	for ad.Next() {
		switch ad.Type() {
		case unix.NFTA_EXPR_NAME:
			name = ad.String()
		case unix.NFTA_EXPR_DATA:
			data = ad.Bytes()
		}
	}
	if name == "byteorder" {
		return decodeByteorder(data)
	}
	e := newExpr(name)
	if e == nil {
		return &opaqueExpr{Name: name}, nil
	}
	if err := expr.Unmarshal(fam, data, e); err != nil {
		return nil, fmt.Errorf("expression %s: %w", name, err)
	}
	if imm, ok := e.(*expr.Immediate); ok && imm.Register == unix.NFT_REG_VERDICT && len(imm.Data) == 0 {
		v := &expr.Verdict{}
		if err := expr.Unmarshal(fam, data, v); err != nil {
			return nil, fmt.Errorf("verdict: %w", err)
		}
		return v, nil
	}
	return e, nil
}

// newExpr returns an empty expression of the types parseRule builds and
// those the fixed chains hold; nil for any other name.
func newExpr(name string) expr.Any {
	switch name {
	case "payload":
		return &expr.Payload{}
	case "cmp":
		return &expr.Cmp{}
	case "lookup":
		return &expr.Lookup{}
	case "meta":
		return &expr.Meta{}
	case "numgen":
		return &expr.Numgen{}
	case "immediate":
		return &expr.Immediate{}
	case "nat":
		return &expr.NAT{}
	case "dynset":
		return &expr.Dynset{}
	case "bitwise":
		return &expr.Bitwise{}
	case "ct":
		return &expr.Ct{}
	case "fib":
		return &expr.Fib{}
	case "reject":
		return &expr.Reject{}
	case "masq":
		return &expr.Masq{}
	case "flow_offload":
		return &expr.FlowOffload{}
	}
	return nil
}

// decodeByteorder decodes a byteorder expression: google/nftables
// v0.3.0 writes them but its unmarshal is "not yet implemented".
func decodeByteorder(data []byte) (*expr.Byteorder, error) {
	ad, err := nfAttrs(data)
	if err != nil {
		return nil, fmt.Errorf("expression byteorder: %w", err)
	}
	e := &expr.Byteorder{}
	for ad.Next() {
		switch ad.Type() {
		case unix.NFTA_BYTEORDER_SREG:
			e.SourceRegister = ad.Uint32()
		case unix.NFTA_BYTEORDER_DREG:
			e.DestRegister = ad.Uint32()
		case unix.NFTA_BYTEORDER_OP:
			e.Op = expr.ByteorderOp(ad.Uint32())
		case unix.NFTA_BYTEORDER_LEN:
			e.Len = ad.Uint32()
		case unix.NFTA_BYTEORDER_SIZE:
			e.Size = ad.Uint32()
		}
	}
	if err := ad.Err(); err != nil {
		return nil, fmt.Errorf("expression byteorder: %w", err)
	}
	return e, nil
}
