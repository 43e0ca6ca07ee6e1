package latency

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"net/netip"
	"slices"
	"strconv"
	"strings"

	"github.com/switchyard-proxy/switchyard/e2e/cluster"
	"github.com/switchyard-proxy/switchyard/e2e/testbed/ruleread"
)

// The nftables tables each proxy programs (family ip).
const (
	nftTableSwitchyard = "switchyard"
	nftTableKubeProxy  = "kube-proxy"
)

// ruleReader reads one Service's own rules on one node: the chain its
// cluster IP dispatches to, resolved once (resolveReader), and in nftables
// mode the named maps that chain looks endpoints up in. A read is one
// command in the node's network namespace; what it prints holds an
// endpoint's address exactly when that node sends the Service's traffic
// there.
type ruleReader struct {
	c     *cluster.Cluster
	node  int
	mode  string // "iptables" or "nftables"
	table string // nftables table
	chain string
	// maps are the maps the chain referenced at the last read (nftables):
	// read in the same command as the chain, and read again at once when
	// the chain names others.
	maps []string
}

// resolveReader finds the chain vip dispatches to on node. It fails until
// the proxy has programmed the Service there.
func resolveReader(ctx context.Context, c *cluster.Cluster, node int, p cluster.Proxy, vip netip.AddrPort) (*ruleReader, error) {
	r := &ruleReader{c: c, node: node, mode: p.Mode}
	switch p.Mode {
	case "iptables":
		out, err := c.NodeExec(ctx, node, "iptables-save", "-t", "nat")
		if err != nil {
			return nil, err
		}
		if r.chain, err = ruleread.IptablesServiceChain(out, vip); err != nil {
			return nil, err
		}
	case "nftables":
		r.table = nftTableSwitchyard
		if p.Kind == cluster.KindKubeProxy {
			r.table = nftTableKubeProxy
		}
		out, err := c.NodeExec(ctx, node, "nft", "list", "map", "ip", r.table, "service-ips")
		if err != nil {
			return nil, err
		}
		if r.chain, err = ruleread.NftServiceChain(out, vip); err != nil {
			return nil, err
		}
	default:
		return nil, fmt.Errorf("rules of mode %q: only iptables and nftables are read", p.Mode)
	}
	return r, nil
}

// read returns the text of the Service's rules that names its endpoints:
// the chain (iptables: its rules as iptables -S prints them; nftables: the
// chain and the elements of its maps that belong to it).
func (r *ruleReader) read(ctx context.Context) ([]byte, error) {
	if r.mode == "iptables" {
		return r.c.NodeExec(ctx, r.node, "iptables", "-t", "nat", "-S", r.chain)
	}
	for range 3 {
		cmds := []string{"list chain ip " + r.table + " " + r.chain}
		for _, m := range r.maps {
			cmds = append(cmds, "list map ip "+r.table+" "+m)
		}
		out, err := r.c.NodeExec(ctx, r.node, "nft", strings.Join(cmds, "; "))
		if err != nil {
			return nil, err
		}
		chain, maps := splitNftListing(out)
		refs := mapRefs(chain)
		names := make([]string, len(refs))
		for i, ref := range refs {
			names[i] = ref.name
		}
		if !slices.Equal(names, r.maps) {
			r.maps = names // the chain names other maps: read those
			continue
		}
		return ownElements(chain, refs, maps), nil
	}
	return nil, fmt.Errorf("node %d: the maps of chain %s keep changing", r.node, r.chain)
}

// splitNftListing separates the output of `list chain …; list map …` into
// the chain's block and each map's block by name.
func splitNftListing(out []byte) (chain string, maps map[string]string) {
	blocks := map[string]*strings.Builder{}
	var chainB strings.Builder
	var cur *strings.Builder
	sc := bufio.NewScanner(bytes.NewReader(out))
	sc.Buffer(make([]byte, 64<<10), 4<<20)
	for sc.Scan() {
		line := sc.Text()
		t := strings.TrimSpace(line)
		switch {
		case strings.HasPrefix(t, "table "):
			cur = nil
			continue
		case strings.HasPrefix(t, "chain "):
			cur = &chainB
		case strings.HasPrefix(t, "map "):
			cur = &strings.Builder{}
			blocks[strings.TrimSuffix(strings.TrimPrefix(t, "map "), " {")] = cur
		}
		if cur != nil {
			cur.WriteString(line + "\n")
		}
	}
	maps = make(map[string]string, len(blocks))
	for name, b := range blocks {
		maps[name] = b.String()
	}
	return chainB.String(), maps
}

// mapRef is a named map an nftables rule looks up, with the range of keys
// it draws (numgen random mod n offset o: [o, o+n)); lo == hi means every
// key (a map not keyed by numgen).
type mapRef struct {
	name   string
	lo, hi uint64
}

// mapRefs lists the maps the chain's rules use ("map @x" or "vmap @x";
// sets matched with "@x" hold no endpoint), in order.
func mapRefs(chain string) []mapRef {
	var refs []mapRef
	for line := range strings.Lines(chain) {
		f := strings.Fields(line)
		for i := 1; i < len(f); i++ {
			name, ok := strings.CutPrefix(f[i], "@")
			if !ok || (f[i-1] != "map" && f[i-1] != "vmap") {
				continue
			}
			refs = append(refs, mapRef{name: name})
			ref := &refs[len(refs)-1]
			for j := 0; j+3 < i; j++ {
				if f[j] == "numgen" && f[j+2] == "mod" {
					n, err := strconv.ParseUint(f[j+3], 10, 64)
					if err != nil {
						break
					}
					var off uint64
					if j+5 < i && f[j+4] == "offset" {
						off, _ = strconv.ParseUint(f[j+5], 10, 64)
					}
					ref.lo, ref.hi = off, off+n
				}
			}
		}
	}
	return refs
}

// ownElements is the chain followed by the elements of its maps whose
// keys fall in the range the chain draws from: Switchyard's endpoint maps
// are shared by the chains of one shard, and another Service's endpoint
// in the same map must not count.
func ownElements(chain string, refs []mapRef, maps map[string]string) []byte {
	var b strings.Builder
	b.WriteString(chain)
	for _, ref := range refs {
		for _, el := range ruleread.Elements([]byte(maps[ref.name])) {
			key, _, _ := strings.Cut(el, " : ")
			if ref.lo == ref.hi || keyIn(key, ref.lo, ref.hi) {
				b.WriteString(ref.name + ": " + el + "\n")
			}
		}
	}
	return []byte(b.String())
}

// keyIn reports whether a numeric key or interval "a-b" starts in [lo, hi).
func keyIn(key string, lo, hi uint64) bool {
	first, _, _ := strings.Cut(key, "-")
	v, err := strconv.ParseUint(strings.TrimSpace(first), 10, 64)
	return err == nil && v >= lo && v < hi
}
