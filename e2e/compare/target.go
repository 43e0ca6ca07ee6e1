package compare

import (
	"context"
	"fmt"
	"net/netip"
	"regexp"
	"strings"
	"time"

	"github.com/switchyard-proxy/switchyard/e2e/testbed/netns"
	"github.com/switchyard-proxy/switchyard/e2e/testbed/ruleread"
)

// readPause is the pause between two targeted reads of one service's
// rules; a read costs a few milliseconds whatever the table's size, so
// the resolution of a change's time is the read's cost plus this.
const readPause = 5 * time.Millisecond

// serviceRules reads the rules of one service port in a node namespace:
// the chain its cluster IP jumps to and, in nftables mode, the sets and
// maps that chain looks endpoints up in (Switchyard keeps endpoints in
// shared maps; kube-proxy names one chain per endpoint, with the address
// in the name). The chain is found once in a full dump taken after the
// first sync, so a change is timed without dumping a table of tens of
// thousands of chains on every poll — or digesting it, as `nft monitor`
// must before it reports anything. Both proxies are read the same way.
type serviceRules struct {
	topo  *netns.Topology
	ns    string
	chain string
	nft   *nftReader // nftables mode; nil for iptables
	// reads records how long each read took: the resolution of changes.
	reads *[]time.Duration
}

// locate finds the chain service vip jumps to in dump (the output of
// ruleDumper for mode).
func locate(dump []byte, mode string, vip netip.AddrPort) (string, error) {
	var chain string
	var err error
	if mode == "nftables" {
		chain, err = ruleread.NftServiceChain(dump, vip)
	} else {
		chain, err = ruleread.IptablesServiceChain(dump, vip)
	}
	if err != nil {
		return "", fmt.Errorf("the %s dump (%d bytes): %w", mode, len(dump), err)
	}
	return chain, nil
}

// newServiceRules prepares targeted reads of chain in ns; close it.
func newServiceRules(topo *netns.Topology, ns, mode, table, chain string, reads *[]time.Duration) (*serviceRules, error) {
	s := &serviceRules{topo: topo, ns: ns, chain: chain, reads: reads}
	if mode == "nftables" {
		var err error
		if s.nft, err = openNFTReader(topo, ns, table, chain); err != nil {
			return nil, err
		}
	}
	return s, nil
}

func (s *serviceRules) close() error {
	if s.nft == nil {
		return nil
	}
	return s.nft.close()
}

// read returns the service's rules as the kernel holds them now: iptables
// -S of the one chain (iptables-nft fetches only that chain), or the
// chain and its sets over netlink.
func (s *serviceRules) read(ctx context.Context) ([]byte, error) {
	start := time.Now()
	defer func() { *s.reads = append(*s.reads, time.Since(start)) }()
	if s.nft != nil {
		return s.nft.read()
	}
	out, err := s.topo.Exec(ctx, s.ns, "iptables", "-t", "nat", "-S", s.chain)
	if err != nil {
		return nil, err
	}
	// kube-proxy DNATs in a KUBE-SEP- chain per endpoint, and names the
	// endpoint in the service chain's comments only below 1,000
	// endpoints: read the chains it jumps to as well, in one shell.
	var script []string
	for _, m := range sepJump.FindAllSubmatch(out, -1) {
		script = append(script, "iptables -t nat -S "+string(m[1]))
	}
	if len(script) == 0 {
		return out, nil
	}
	seps, err := s.topo.Exec(ctx, s.ns, "sh", "-c", strings.Join(script, " && "))
	if err != nil {
		return nil, err
	}
	return append(out, seps...), nil
}

// sepJump is a jump to an endpoint chain; the name is iptables' own
// (letters, digits, dashes), so it is safe in a shell command.
var sepJump = regexp.MustCompile(`-j (KUBE-SEP-[A-Z0-9]+)\b`)

// waitUntil reads until ok holds and returns when that read returned.
func (s *serviceRules) waitUntil(ctx context.Context, what string, alive func() error, ok func([]byte) bool) (time.Time, error) {
	for {
		out, err := s.read(ctx)
		if err == nil && ok(out) {
			return time.Now(), nil
		}
		if err := alive(); err != nil {
			return time.Time{}, fmt.Errorf("waiting for %s: %w", what, err)
		}
		select {
		case <-ctx.Done():
			return time.Time{}, fmt.Errorf("waiting for %s in chain %s of %s (last read error: %v): %w",
				what, s.chain, s.ns, err, context.Cause(ctx))
		case <-time.After(readPause):
		}
	}
}
