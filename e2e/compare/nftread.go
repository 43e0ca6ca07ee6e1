package compare

import (
	"bytes"
	"fmt"
	"maps"
	"slices"

	gnft "github.com/google/nftables"
	"github.com/google/nftables/expr"

	"github.com/switchyard-proxy/switchyard/e2e/testbed/netns"
)

// nftReader reads one chain of an nftables table over netlink, in a node
// namespace: the kernel dumps that chain's rules only, and the elements of
// just the sets and maps those rules look up. The nft command cannot do
// that: `nft list chain` fetches the whole table's chains and maps first,
// 70-120 ms per read at 1,000 services, which would also take the CPU from
// the proxy being timed.
type nftReader struct {
	conn  *gnft.Conn
	table *gnft.Table
	chain *gnft.Chain
}

// openNFTReader opens a netlink socket inside ns (created on a thread in
// ns, so it stays there) for chain of the IPv4 table.
func openNFTReader(topo *netns.Topology, ns, table, chain string) (*nftReader, error) {
	var conn *gnft.Conn
	if err := topo.Do(ns, func() (err error) {
		conn, err = gnft.New(gnft.AsLasting())
		return err
	}); err != nil {
		return nil, fmt.Errorf("netlink socket in %s: %w", ns, err)
	}
	t := &gnft.Table{Name: table, Family: gnft.TableFamilyIPv4}
	return &nftReader{conn: conn, table: t, chain: &gnft.Chain{Name: chain, Table: t}}, nil
}

func (r *nftReader) close() error { return r.conn.CloseLasting() }

// read returns what the chain holds as text: each rule's data and jump
// targets, then each looked-up set's element keys, values and verdicts.
func (r *nftReader) read() ([]byte, error) {
	rules, err := r.conn.GetRules(r.table, r.chain)
	if err != nil {
		return nil, fmt.Errorf("rules of chain %s: %w", r.chain.Name, err)
	}
	elems := map[string][]gnft.SetElement{}
	for _, name := range lookedUp(rules) {
		set, err := r.conn.GetSetByName(r.table, name)
		if err != nil {
			return nil, fmt.Errorf("set %s of chain %s: %w", name, r.chain.Name, err)
		}
		if elems[name], err = r.conn.GetSetElements(set); err != nil {
			return nil, fmt.Errorf("elements of set %s: %w", name, err)
		}
	}
	return describe(rules, elems), nil
}

// lookedUp lists the sets and maps rules look up (named ones and the
// anonymous ones of inline vmaps), sorted and unique.
func lookedUp(rules []*gnft.Rule) []string {
	var names []string
	for _, r := range rules {
		for _, e := range r.Exprs {
			if l, ok := e.(*expr.Lookup); ok && l.SetName != "" {
				names = append(names, l.SetName)
			}
		}
	}
	slices.Sort(names)
	return slices.Compact(names)
}

// describe renders rules and set elements as lines ruleread.HoldsAddr
// can search: every data value of four bytes or more as the IPv4 address
// its first four bytes spell (addresses lead both Switchyard's "address .
// port" map values and the rules' comparisons), and every verdict's chain
// name (kube-proxy names an endpoint's chain after its address).
func describe(rules []*gnft.Rule, elems map[string][]gnft.SetElement) []byte {
	var b bytes.Buffer
	data := func(d []byte) {
		if len(d) >= 4 {
			fmt.Fprintf(&b, "%d.%d.%d.%d\n", d[0], d[1], d[2], d[3])
		}
	}
	for _, r := range rules {
		for _, e := range r.Exprs {
			switch x := e.(type) {
			case *expr.Cmp:
				data(x.Data)
			case *expr.Immediate:
				data(x.Data)
			case *expr.Verdict:
				fmt.Fprintf(&b, "verdict %s\n", x.Chain)
			}
		}
	}
	for _, name := range slices.Sorted(maps.Keys(elems)) {
		for _, el := range elems[name] {
			data(el.Key)
			data(el.Val)
			if el.VerdictData != nil {
				fmt.Fprintf(&b, "verdict %s\n", el.VerdictData.Chain)
			}
		}
	}
	return b.Bytes()
}
