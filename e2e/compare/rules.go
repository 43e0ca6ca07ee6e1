package compare

import (
	"context"
	"fmt"
	"net/netip"
	"time"

	"github.com/switchyard-proxy/switchyard/e2e/testbed/netns"
	"github.com/switchyard-proxy/switchyard/e2e/testbed/ruleread"
)

// pollPause is the least pause between two rule dumps. The pause is at
// least as long as the last dump took, so that dumping (seconds for
// kube-proxy's tens of thousands of chains) never takes more than half a
// core from the proxy it measures.
const pollPause = 20 * time.Millisecond

// ruleDumper reads the ruleset a proxy wrote in one node namespace, with
// the same command whichever proxy wrote it.
type ruleDumper struct {
	topo  *netns.Topology
	ns    string
	mode  string // iptables or nftables
	table string // the nftables table
	argv  []string
	// polls records how long each dump took.
	polls []time.Duration
	// last is the dump that satisfied the last waitUntil.
	last []byte
}

// nftTable names the table an nftables-mode proxy programs.
func newRuleDumper(topo *netns.Topology, ns, mode, nftTable string) *ruleDumper {
	argv := []string{"iptables-save", "-t", "nat"}
	if mode == "nftables" {
		argv = []string{"nft", "list", "table", "ip", nftTable}
	}
	return &ruleDumper{topo: topo, ns: ns, mode: mode, table: nftTable, argv: argv}
}

// serviceRules locates service vip in the last dump waitUntil accepted
// and returns a targeted reader of its rules.
func (d *ruleDumper) serviceRules(vip netip.AddrPort, reads *[]time.Duration) (*serviceRules, error) {
	chain, err := locate(d.last, d.mode, vip)
	if err != nil {
		return nil, err
	}
	return newServiceRules(d.topo, d.ns, d.mode, d.table, chain, reads)
}

// dump returns the ruleset; a table that does not exist yet is empty.
func (d *ruleDumper) dump(ctx context.Context) []byte {
	start := time.Now()
	out, err := d.topo.Exec(ctx, d.ns, d.argv...)
	d.polls = append(d.polls, time.Since(start))
	if err != nil {
		return nil
	}
	return out
}

// waitUntil dumps until ok holds on a dump and returns when that dump
// returned, or fails when ctx ends or alive reports the proxy gone.
func (d *ruleDumper) waitUntil(ctx context.Context, what string, alive func() error, ok func([]byte) bool) (time.Time, error) {
	for {
		out := d.dump(ctx)
		if ok(out) {
			d.last = out
			return time.Now(), nil
		}
		if err := alive(); err != nil {
			return time.Time{}, fmt.Errorf("waiting for %s: %w", what, err)
		}
		select {
		case <-ctx.Done():
			return time.Time{}, fmt.Errorf("waiting for %s in %s: %w", what, d.ns, context.Cause(ctx))
		case <-time.After(max(pollPause, d.polls[len(d.polls)-1])):
		}
	}
}

// pollMedian is the median dump time so far, in seconds.
func (d *ruleDumper) pollMedian() float64 { return medianSeconds(d.polls) }

// medianSeconds is the median of ds in seconds (0 if empty).
func medianSeconds(ds []time.Duration) float64 {
	xs := make([]float64, len(ds))
	for i, p := range ds {
		xs[i] = p.Seconds()
	}
	return seconds(time.Duration(median(xs) * float64(time.Second)))
}

// allVIPs reports whether every address in want occurs in dump.
func allVIPs(want map[netip.Addr]bool) func([]byte) bool {
	return func(dump []byte) bool { return ruleread.CountAddrs(dump, "10.96.", want) == len(want) }
}
